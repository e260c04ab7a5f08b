"""Prices for usage cost: an optional ``prices.toml`` beside ``config.toml``, USD per million tokens.

    "claude-opus-4-6" = { input = 15.0, output = 75.0, cache_write = 18.75, cache_read = 1.5 }
    "gpt-5*" = { input = 1.25, output = 10.0 }

A name matches exactly, else the longest matching ``*`` pattern; ``cache_write`` / ``cache_read`` default to
``input``. The same entries may sit under a ``[prices]`` table (the shape they take inside ``config.toml``).
"""

from __future__ import annotations

import fnmatch
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from store.safetext import one_line

PRICES_FILE = "prices.toml"
MILLION = 1_000_000


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
    """The price table in ``path``; by default config.toml's ``[prices]`` table, else ``prices.toml`` beside it
    (:func:`prices_path`); an empty table when there is none, and an empty one with the reason when it cannot be
    read."""
    if path is None:
        from store import config

        settings = config.load()
        if settings.prices:
            return replace(parse_prices(settings.prices, f"{settings.path.name} [prices]"), path=str(settings.path))
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
