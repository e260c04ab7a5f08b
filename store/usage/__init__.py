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
from store.usage.prices import NO_PRICES, PRICES_FILE, Price, PriceTable, load_prices, parse_prices, prices_path
from store.usage.report import check_since, daily_series, usage

__all__ = [
    "GROUPS", "NO_PRICES", "PRICES_FILE", "SOURCES", "TOKEN_CAP", "CapturedRecords", "CapturedUsage", "Group",
    "Price", "PriceTable", "Source", "UsageReport", "UsageRow", "captured_usage", "check_since", "daily_series",
    "load_prices", "parse_prices", "prices_path", "usage",
]
