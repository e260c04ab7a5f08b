"""Token usage at a glance: per day (UTC), session, model and work dir, from two sources, with cost where a price
table is configured.

* **mothx**: ``request_stats`` of ``sessions.db`` (one row per model request; its rows are kept when their
  session is deleted, so a session or work dir may be unknown: the key is then ``""``). Aggregated in SQLite,
  one ``GROUP BY`` query per view (grouped by the view's key and the model, so cost can be priced per model);
  Python only folds those groups (never the request rows). ``request_stats`` has no cache columns: its
  ``input_tokens`` are every input token, cached or not.
* **captured**: the usage records of the captured Claude Code and Codex transcripts, read through the checkpoint
  store (:func:`store.agents.checkpoint_read.load_from`, verified as it streams): a Claude Code ``assistant``
  record's ``message.usage`` (``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``,
  ``cache_read_input_tokens``; the records of one message, which repeat its usage, count once), a Codex
  ``event_msg`` of type ``token_count`` (its ``last_token_usage``; a repeated event whose running total did not
  move counts once; Codex's ``input_tokens`` include the cached ones, shown here as cache reads). They are put in
  an in-memory table and aggregated by the same kind of query.

Cells a foreign writer damaged (text in an integer column, a negative or absurd count, a BLOB) count as 0 and are
counted in :attr:`UsageRow.damaged`; nothing read here raises for what a row holds. Keys are raw data (a model
name or work dir may hold terminal escapes or markup): the UI shows them through the safe-text boundary.

Prices: an optional ``prices.toml`` beside ``config.toml`` (:func:`prices_path`), USD per million tokens::

    "claude-opus-4-6" = { input = 15.0, output = 75.0, cache_write = 18.75, cache_read = 1.5 }
    "gpt-5*" = { input = 1.25, output = 10.0 }

A name matches exactly, else the longest matching ``*`` pattern. ``cache_write`` / ``cache_read`` default to
``input``. Without a table (or for a model it does not name) there is no cost, never a guessed one.

Nothing here writes: the session directory is only read, in any open mode.
"""

from __future__ import annotations

import fnmatch
import sqlite3
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from store import times
from store.mothx.cells import as_text
from store.mothx.jsonvalue import parse_object
from store.safetext import one_line

if TYPE_CHECKING:
    from store.agents.checkpoint_model import CheckpointInfo, PersistedSessionState, RecordReader
    from store.mothx.db import Database
    from store.mothx.schema import SchemaInfo
    from store.mothx.sessiondir import SessionDir

Group = Literal["day", "session", "model", "cwd"]
Source = Literal["mothx", "captured", "all"]
GROUPS: tuple[Group, ...] = ("day", "session", "model", "cwd")
SOURCES: tuple[Source, ...] = ("all", "mothx", "captured")
PRICES_FILE = "prices.toml"

TOKEN_CAP = 2**32 - 1
"""The largest token count one cell may hold to be believed (more is a damaged cell, counted as 0); it also keeps
``SUM`` far from a 64-bit overflow."""

MILLION = 1_000_000


# --- prices -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Price:
    """USD per million tokens of one model."""

    input: float
    output: float
    cache_write: float | None = None  # None: the input price
    cache_read: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cache_write: int, cache_read: int) -> float:
        cw = self.input if self.cache_write is None else self.cache_write
        cr = self.input if self.cache_read is None else self.cache_read
        return (input_tokens * self.input + output_tokens * self.output + cache_write * cw + cache_read * cr) / MILLION


@dataclass(frozen=True)
class PriceTable:
    """Prices by model name or ``*`` pattern; ``problems`` names every entry that was not understood."""

    entries: tuple[tuple[str, Price], ...] = ()
    problems: tuple[str, ...] = ()
    path: str = ""

    @property
    def configured(self) -> bool:
        return bool(self.entries)

    def find(self, model: str) -> Price | None:
        exact = dict(self.entries)
        if model in exact:
            return exact[model]
        best: tuple[int, Price] | None = None
        for name, price in self.entries:
            if "*" in name and fnmatch.fnmatchcase(model, name) and (best is None or len(name) > best[0]):
                best = (len(name), price)
        return best[1] if best else None


NO_PRICES = PriceTable()

_PRICE_KEYS = ("input", "output", "cache_write", "cache_read")


def _rate(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    rate = float(value)
    return rate if 0 <= rate < 1e9 else None


def parse_prices(table: Mapping[str, object], source: str = PRICES_FILE) -> PriceTable:
    """A price table from parsed TOML (``{"model": {"input": 3.0, "output": 15.0}}``); bad entries are skipped
    and named in ``problems`` (one line each, safe)."""
    entries: list[tuple[str, Price]] = []
    problems: list[str] = []
    for name, value in table.items():
        shown = one_line(name)
        if not isinstance(value, Mapping):
            problems.append(f"{source}: {shown} is not a table like {{ input = 3.0, output = 15.0 }}")
            continue
        unknown = sorted(one_line(k) for k in value if k not in _PRICE_KEYS)
        if unknown:
            problems.append(f"{source}: {shown} has unknown keys: {', '.join(unknown)}")
        rates = {k: _rate(value[k]) for k in _PRICE_KEYS if k in value}
        bad = [k for k in _PRICE_KEYS if k in value and rates[k] is None]
        if bad:
            problems.append(f"{source}: {shown}.{bad[0]} is not a non-negative number")
            continue
        if rates.get("input") is None or rates.get("output") is None:
            problems.append(f"{source}: {shown} needs both input and output (USD per million tokens)")
            continue
        entries.append((name, Price(rates["input"] or 0.0, rates["output"] or 0.0,
                                    rates.get("cache_write"), rates.get("cache_read"))))
    return PriceTable(tuple(entries), tuple(problems), source)


def prices_path() -> Path:
    """``prices.toml`` in the user config directory (beside ``config.toml``)."""
    from store.paths import config_dir

    return config_dir() / PRICES_FILE


def load_prices(path: Path | None = None) -> PriceTable:
    """The price table in ``path`` (default :func:`prices_path`); an empty table when the file is absent, and an
    empty one with the reason when it cannot be read."""
    target = path if path is not None else prices_path()
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return PriceTable(path=str(target))
    except (OSError, UnicodeDecodeError) as exc:
        return PriceTable(problems=(f"{one_line(target)}: cannot be read ({one_line(exc)})",), path=str(target))
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return PriceTable(problems=(f"{one_line(target)}: not TOML ({one_line(exc)})",), path=str(target))
    table = data.get("prices", data) if isinstance(data.get("prices"), dict) else data
    return replace(parse_prices(table, target.name), path=str(target))


# --- the result ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UsageRow:
    """One group of a view (or the totals): the token sums of its requests.

    ``key``: the day (``YYYY-MM-DD``), session id, model or work dir (``""``: unknown — a deleted session, a
    time that does not parse). ``agent``: for a session row, ``""`` for a mothx session, else the agent id of
    the captured session (``claude-code``, ``codex``). ``cwd``: a session row's work dir when known.
    ``cost``: USD of the priced part, None when no request of the group has a price; ``unpriced`` counts the
    tokens of requests whose model has none (with a table configured). ``damaged``: cells read as 0."""

    key: str
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    total_tokens: int = 0
    first_at: str = ""
    last_at: str = ""
    cost: float | None = None
    unpriced: int = 0
    damaged: int = 0
    agent: str = ""
    cwd: str = ""
    session_exists: bool = True
    sources: tuple[str, ...] = ()

    @property
    def ident(self) -> tuple[str, str]:
        return (self.agent, self.key)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "key": self.key, "requests": self.requests, "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens, "cacheWriteTokens": self.cache_write_tokens,
            "cacheReadTokens": self.cache_read_tokens, "totalTokens": self.total_tokens,
            "firstAt": self.first_at, "lastAt": self.last_at,
            "cost": None if self.cost is None else round(self.cost, 6), "unpricedTokens": self.unpriced,
            "damagedCells": self.damaged, "sources": list(self.sources),
        }
        if self.agent or self.cwd or not self.session_exists:
            out.update({"agent": self.agent, "cwd": self.cwd, "sessionExists": self.session_exists})
        return out


@dataclass(frozen=True)
class UsageReport:
    """A view: its rows (days oldest first; every other view by total tokens, largest first), the totals, and
    one line per problem met (damaged cells, a checkpoint that did not verify, a price entry)."""

    by: Group
    source: Source
    since: str
    rows: tuple[UsageRow, ...]
    totals: UsageRow
    priced: bool
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        return {"by": self.by, "source": self.source, "since": self.since or None, "priced": self.priced,
                "rows": [r.to_json() for r in self.rows], "totals": self.totals.to_json(),
                "problems": list(self.problems)}


# --- captured usage records -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CapturedUsage:
    """One model response's usage in a captured transcript (timestamps normalised to UTC RFC 3339)."""

    agent: str
    session_id: str
    timestamp: str
    model: str
    cwd: str
    input_tokens: int
    output_tokens: int
    cache_write_tokens: int
    cache_read_tokens: int
    damaged: int = 0


@dataclass(frozen=True)
class CapturedRecords:
    """Every usage record of every published checkpoint, and one line per checkpoint that could not be read."""

    records: tuple[CapturedUsage, ...] = ()
    problems: tuple[str, ...] = ()


class _Counter:
    def __init__(self) -> None:
        self.damaged = 0

    def tokens(self, obj: Mapping[str, object], name: str) -> int:
        value = obj.get(name)
        if value is None:
            return 0
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= TOKEN_CAP:
            return value
        self.damaged += 1
        return 0


def _utc(value: object) -> str:
    moment = times.parse_rfc3339(value)
    return times.format_rfc3339(moment) if moment is not None else ""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


class _ClaudeUsage:
    """Claude Code: each ``assistant`` record's ``message.usage``; one message split over records counts once
    (its last record's usage, keyed by ``message.id`` and ``requestId``)."""

    def __init__(self, session_id: str, cwd: str) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.by_message: dict[tuple[str, str], CapturedUsage] = {}
        self.anonymous: list[CapturedUsage] = []

    def accept(self, obj: Mapping[str, object]) -> None:
        if obj.get("type") != "assistant":
            return
        msg = obj.get("message")
        if not isinstance(msg, Mapping):
            return
        usage = msg.get("usage")
        model = _text(msg.get("model"))
        if not isinstance(usage, Mapping) or model == "<synthetic>":
            return
        c = _Counter()
        rec = CapturedUsage(
            "claude-code", self.session_id, _utc(obj.get("timestamp")), model, _text(obj.get("cwd")) or self.cwd,
            c.tokens(usage, "input_tokens"), c.tokens(usage, "output_tokens"),
            c.tokens(usage, "cache_creation_input_tokens"), c.tokens(usage, "cache_read_input_tokens"), 0)
        rec = replace(rec, damaged=c.damaged)
        mid = _text(msg.get("id"))
        if mid:
            key = (mid, _text(obj.get("requestId")))
            first = self.by_message.get(key)
            # the first record's time (when the response began), the last record's counts
            self.by_message[key] = rec if first is None else replace(rec, timestamp=first.timestamp or rec.timestamp)
        else:
            self.anonymous.append(rec)

    def records(self) -> list[CapturedUsage]:
        return [*self.by_message.values(), *self.anonymous]


class _CodexUsage:
    """Codex: ``token_count`` events' ``last_token_usage`` with the model and work dir of the latest turn context;
    an event whose running total equals the previous one's is a repeat and counts once."""

    def __init__(self, session_id: str, cwd: str) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.model = ""
        self.last_total: object = None
        self.out: list[CapturedUsage] = []

    def accept(self, obj: Mapping[str, object]) -> None:
        payload = obj.get("payload")
        if not isinstance(payload, Mapping):
            return
        kind = obj.get("type")
        if kind in ("session_meta", "turn_context"):
            self.cwd = _text(payload.get("cwd")) or self.cwd
            self.model = _text(payload.get("model")) or self.model
            return
        if kind != "event_msg" or payload.get("type") != "token_count":
            return
        info = payload.get("info")
        if not isinstance(info, Mapping):
            return
        total = info.get("total_token_usage")
        if total is not None and total == self.last_total:
            return
        self.last_total = total
        last = info.get("last_token_usage")
        if not isinstance(last, Mapping):
            return
        c = _Counter()
        given = c.tokens(last, "input_tokens")
        cached = min(c.tokens(last, "cached_input_tokens"), given)
        self.out.append(CapturedUsage("codex", self.session_id, _utc(obj.get("timestamp")), self.model, self.cwd,
                                      given - cached, c.tokens(last, "output_tokens"), 0, cached, c.damaged))

    def records(self) -> list[CapturedUsage]:
        return self.out


_MARKERS = ('"usage"', '"token_count"', '"turn_context"', '"session_meta"')


def _checkpoint_usage(db: Database, info: CheckpointInfo) -> list[CapturedUsage]:
    from store.agents.checkpoint_read import load_from

    cwd = info.state.cwd if info.state is not None else ""
    reader = _CodexUsage(info.agent_session_id, cwd) if info.agent_id == "codex" else \
        _ClaudeUsage(info.agent_session_id, cwd)

    def consume(state: PersistedSessionState, read: RecordReader) -> None:
        while (rec := read()) is not None:
            content = rec.content
            text = content if isinstance(content, str) else content.decode("utf-8", "replace")
            if not any(marker in text for marker in _MARKERS):
                continue
            obj, _ = parse_object(text)
            if obj is not None:
                reader.accept(obj)

    load_from(db, info.agent_id, info.agent_session_id, consume)
    return reader.records()


def captured_usage(sd: SessionDir) -> CapturedRecords:
    """The usage records of every published checkpoint of ``sd`` (read-only; a checkpoint that does not verify
    is skipped and named in ``problems``)."""
    from store.agents.checkpoint_db import has_tables, state_db
    from store.agents.checkpoint_read import read_checkpoint_page
    from store.errors import StoreError

    records: list[CapturedUsage] = []
    problems: list[str] = []
    try:
        with state_db(sd) as db:
            if db is None:
                return CapturedRecords()
            infos: list[CheckpointInfo] = []
            with db.read() as conn:
                if not has_tables(conn):
                    return CapturedRecords()
                after = None
                while True:
                    page = read_checkpoint_page(conn, after=after, limit=1000)
                    infos.extend(page.rows)
                    if not page.more or page.last_key is None:
                        break
                    after = page.last_key
            for info in infos:
                if info.state is None:
                    continue
                try:
                    records.extend(_checkpoint_usage(db, info))
                except (StoreError, sqlite3.Error) as exc:
                    problems.append(f"{one_line(info.agent_id)} {one_line(info.agent_session_id)}: {one_line(exc)}")
    except (StoreError, sqlite3.Error) as exc:
        problems.append(f"the checkpoint file cannot be read: {one_line(exc)}")
    return CapturedRecords(tuple(records), tuple(problems))


# --- the queries ------------------------------------------------------------------------------------------------------


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


__all__ = [
    "GROUPS", "NO_PRICES", "PRICES_FILE", "SOURCES", "CapturedRecords", "CapturedUsage", "Group", "Price",
    "PriceTable", "Source", "UsageReport", "UsageRow", "captured_usage", "check_since", "daily_series",
    "load_prices", "parse_prices", "prices_path", "usage",
]
