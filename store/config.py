"""The user's configuration: one ``config.toml`` in the user config directory (platformdirs).

Every setting is declared once in :data:`SETTINGS` (name, kind, default, what it does); the ``[keymap]`` table
maps action ids (``app.quit``, ``sessions.filter``, …; ``sessionscope`` lists them in the README's key map) to
keys. The file is read with :mod:`tomllib` and written with ``tomli_w`` (atomically: a temporary file renamed
over the old one, every other setting kept). A bad file is never fatal: an unknown key, a value of the wrong
kind or an unreadable file becomes one line in :attr:`Config.problems`, naming the key, and the default applies.

The two files of earlier versions, ``settings.toml`` (``theme``) and ``keymap.toml`` (``[keymap]``), are read
once when no ``config.toml`` exists yet, folded into a new ``config.toml``, and renamed ``*.migrated``.

This module imports nothing of the app: the command line (``sessionscope config path|show|set``) and the app
read it alike. Action ids are checked by the app (``tui.actions.unknown_ids``), which knows them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from store.safetext import one_line

CONFIG_FILE = "config.toml"
LEGACY_FILES = ("settings.toml", "keymap.toml")
OPEN_MODES = ("read-write", "read-only", "snapshot")


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _nonempty(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _bool(value: object) -> bool | None:
    return value if isinstance(value, bool) else None


def _open_mode(value: object) -> str | None:
    return value if isinstance(value, str) and value in OPEN_MODES else None


def _time_zone(value: object) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return None
    name = value.strip()
    if name in ("UTC", "local"):
        return name
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None
    return name


def _date_format(value: object) -> str | None:
    if not isinstance(value, str) or "%" not in value:
        return None
    import datetime

    try:
        datetime.datetime(2026, 1, 2, 3, 4, 5).strftime(value)
    except ValueError:
        return None
    return value


def _store_url(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    url = value.strip()
    if url == "" or url.startswith(("sqlite:", "postgresql:", "postgresql+psycopg:", "postgres:")):
        return url
    return None


@dataclass(frozen=True)
class Setting:
    """One setting of ``config.toml``: its name, default, what values it takes and what it does."""

    name: str
    default: object
    takes: str  # what a value must be, for the problem line and the documentation
    description: str
    check: Callable[[object], object | None]  # the value as used, or None when it is not acceptable


SETTINGS: tuple[Setting, ...] = (
    Setting("theme", "sessionscope-dark", "a theme name", "The theme (ctrl+t or the palette change it and "
            "remember the choice here).", _nonempty),
    Setting("default_dir", "", "a path", "The session directory opened without --dir (empty: $MOTHX_DIR/sessions "
            "or ~/.mothx/sessions).", _text),
    Setting("open_mode", "read-write", "read-write, read-only or snapshot",
            "How the app opens a directory without --read-only or --snapshot (commands keep their own "
            "defaults: reads open read-only, repairs read-write).", _open_mode),
    Setting("store", "", "a sqlite: or postgresql: URL", "The checkpoint store of captured sessions (empty: the "
            "default file; SESSIONSCOPE_STORE and --store take precedence).", _store_url),
    Setting("mouse", True, "true or false", "Whether the app answers the mouse.", _bool),
    Setting("time_zone", "UTC", "UTC, local or an IANA name such as Europe/Berlin",
            "The time zone the app's lists show times in (the command line prints UTC).", _time_zone),
    Setting("date_format", "%Y-%m-%d %H:%M", "a strftime format", "How the app's lists show a time.",
            _date_format),
)
"""Every setting, in the order ``config show`` and the README list them."""

_BY_NAME = {setting.name: setting for setting in SETTINGS}


def config_path() -> Path:
    from store.paths import config_dir

    return config_dir() / CONFIG_FILE


@dataclass(frozen=True)
class Config:
    """What ``config.toml`` says, checked: :meth:`get` gives a setting (its default when unset or bad)."""

    path: Path
    values: dict[str, object] = field(default_factory=dict)  # the acceptable values set in the file
    keymap: dict[str, str] = field(default_factory=dict)  # action id → keys ("j,down")
    prices: dict[str, object] = field(default_factory=dict)  # [prices]: model → USD per million tokens
    problems: tuple[str, ...] = ()
    migrated: tuple[str, ...] = ()  # legacy files folded in on this read

    def get(self, name: str) -> object:
        setting = _BY_NAME[name]
        return self.values.get(name, setting.default)

    def text(self, name: str) -> str:
        value = self.get(name)
        return value if isinstance(value, str) else ""

    def flag(self, name: str) -> bool:
        return bool(self.get(name))


def _flatten(table: dict[str, object], prefix: str = "") -> Iterable[tuple[str, object]]:
    for name, value in table.items():
        full = f"{prefix}.{name}" if prefix else name
        if isinstance(value, dict):
            yield from _flatten(value, full)
        else:
            yield full, value


def parse_keymap(table: object, source: str) -> tuple[dict[str, str], list[str]]:
    """``[keymap] action_id = "key"`` (dotted ids bare or quoted; a value a string ``"j,down"`` or a list of
    keys) as action id → keys, with one problem line per bad value."""
    if not isinstance(table, dict):
        return {}, [f"{source}: [keymap] must be a table of action ids."]
    keymap: dict[str, str] = {}
    problems: list[str] = []
    for action_id, value in _flatten(table):
        if isinstance(value, list) and value and all(isinstance(v, str) and v.strip() for v in value):
            keys = ",".join(v.strip() for v in value)
        elif isinstance(value, str) and value.strip():
            keys = ",".join(part.strip() for part in value.split(",") if part.strip())
        else:
            problems.append(f"{source}: the key for '{one_line(action_id)}' must be a non-empty string.")
            continue
        keymap[action_id] = keys
    return keymap, problems


def parse(text: str, path: Path) -> Config:
    """The configuration in ``text`` (the contents of ``path``), checked key by key."""
    source = str(path)
    import tomllib  # (only when there is a file to read: not on every start-up)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return Config(path, problems=(f"{source} is not valid TOML ({one_line(exc)}); the defaults apply.",))
    values: dict[str, object] = {}
    problems: list[str] = []
    keymap: dict[str, str] = {}
    prices: dict[str, object] = {}
    for name, value in data.items():
        if name == "keymap":
            keymap, bad = parse_keymap(value, source)
            problems.extend(bad)
            continue
        if name == "prices":  # checked entry by entry where usage reads it (store.usage.prices)
            if isinstance(value, dict):
                prices = dict(value)
            else:
                problems.append(f"{source}: [prices] must be a table of models.")
            continue
        setting = _BY_NAME.get(name)
        if setting is None:
            known = ", ".join([s.name for s in SETTINGS] + ["[keymap]", "[prices]"])
            problems.append(f"{source}: unknown setting '{one_line(name)}' (known: {known}).")
            continue
        checked = setting.check(value)
        if checked is None:
            problems.append(f"{source}: {name} must be {setting.takes}, not {one_line(repr(value))}; "
                            f"the default ({setting.default!r}) applies.")
            continue
        values[name] = checked
    return Config(path, values, keymap, prices, tuple(problems))


def _read_legacy(folder: Path) -> tuple[dict[str, object], list[str], list[Path]]:
    """What settings.toml and keymap.toml held (a broken one is reported and left in place)."""
    data: dict[str, object] = {}
    problems: list[str] = []
    found: list[Path] = []
    for name in LEGACY_FILES:
        path = folder / name
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except OSError as exc:
            problems.append(f"{path} cannot be read ({one_line(exc.strerror or exc)}); it was not migrated.")
            continue
        import tomllib  # (only when there is a file to read: not on every start-up)
        try:
            table = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"{path} is not valid TOML ({one_line(exc)}); it was not migrated.")
            continue
        if name == "keymap.toml":
            if "keymap" in table:
                data["keymap"] = table["keymap"]
        elif isinstance(table.get("theme"), str):
            data["theme"] = table["theme"]
        found.append(path)
    return data, problems, found


def write(path: Path, data: dict[str, object]) -> None:
    """Write ``data`` as TOML to ``path`` atomically (a temporary file in the same folder, renamed over it)."""
    import tomli_w

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            tomli_w.dump(data, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(path: Path | None = None) -> Config:
    """The configuration (``config_path()`` by default). When the file does not exist but the earlier
    ``settings.toml`` / ``keymap.toml`` do (in the same folder), they are folded into a new ``config.toml`` first
    and renamed ``*.migrated``; a folder that cannot be written keeps them and they are read as they are."""
    path = config_path() if path is None else path
    try:
        return parse(path.read_text(encoding="utf-8"), path)
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        return Config(path, problems=(f"{path} cannot be read ({one_line(reason)}); the defaults apply.",))
    data, problems, found = _read_legacy(path.parent)
    if not found:
        return Config(path, problems=tuple(problems))
    migrated: list[str] = []
    try:
        write(path, data)
        for old in found:
            os.replace(old, old.with_name(old.name + ".migrated"))
            migrated.append(old.name)
    except OSError as exc:
        problems.append(f"{path} cannot be written ({one_line(exc.strerror or exc)}); the older files are read "
                        "as they are.")
    config = parse(tomli_text(data), path)
    return Config(path, config.values, config.keymap, config.prices, (*problems, *config.problems),
                  tuple(migrated))


def tomli_text(data: dict[str, object]) -> str:
    import tomli_w

    return tomli_w.dumps(data)


def _raw(path: Path) -> dict[str, object]:
    """The file's table as it is (empty when missing); a broken file refuses a change (it would be lost)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    import tomllib  # (only when there is a file to read: not on every start-up)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({one_line(exc)}); fix or remove it first.") from exc


class ConfigError(ValueError):
    """A setting that cannot be made: an unknown key, or a value the setting does not take."""


def parse_value(name: str, text: str) -> object:
    """``text`` (as typed on the command line) as a value of setting ``name``; :class:`ConfigError` if not."""
    setting = _BY_NAME.get(name)
    if setting is None:
        known = ", ".join(s.name for s in SETTINGS)
        raise ConfigError(f"There is no setting '{one_line(name)}' (known: {known}; keys: keymap.ACTION_ID).")
    value: object = text
    if isinstance(setting.default, bool):
        lowered = text.strip().lower()
        value = True if lowered in ("true", "yes", "on", "1") else False if lowered in ("false", "no", "off", "0") \
            else text
    checked = setting.check(value)
    if checked is None:
        raise ConfigError(f"{name} must be {setting.takes}, not {one_line(repr(text))}.")
    return checked


def set_value(key: str, text: str, path: Path | None = None) -> Config:
    """Set ``key`` (a setting, or ``keymap.ACTION_ID``) to ``text`` in the file, keeping everything else."""
    path = config_path() if path is None else path
    data = _raw(path)
    if key.startswith("keymap."):
        action_id = key.removeprefix("keymap.")
        keys = [part.strip() for part in text.split(",") if part.strip()]
        if not action_id or not keys:
            raise ConfigError("A keymap setting is keymap.ACTION_ID = KEYS, e.g. keymap.app.quit 'x'.")
        table = data.get("keymap")
        table = dict(table) if isinstance(table, dict) else {}
        table[action_id] = ",".join(keys)
        data["keymap"] = table
    else:
        data[key] = parse_value(key, text)
    write(path, data)
    return load(path)


def remember(name: str, value: object, path: Path | None = None) -> None:
    """Write one setting the app changed (e.g. the theme), keeping the rest; unchanged: nothing is written."""
    path = config_path() if path is None else path
    try:
        data = _raw(path)
    except ConfigError:
        return  # a broken file is the user's: the app does not overwrite it
    if data.get(name) == value:
        return
    data[name] = value
    write(path, data)


def default_root(config: Config | None = None) -> Path:
    """The session directory opened without --dir: ``default_dir``, else $MOTHX_DIR/sessions or
    ~/.mothx/sessions."""
    from store.paths import default_session_dir

    chosen = (config or load()).text("default_dir").strip()
    return Path(chosen).expanduser() if chosen else default_session_dir()


def show(config: Config) -> str:
    """Every setting with the value in effect (set, or the default) as TOML, then the keymap overrides."""
    lines = [f"# {config.path}"]
    for setting in SETTINGS:
        state = "" if setting.name in config.values else "  # default"
        lines.append(f"{tomli_text({setting.name: config.get(setting.name)}).strip()}{state}")
    if config.keymap:
        lines.append("")
        lines.append("[keymap]")
        for action_id, keys in config.keymap.items():
            lines.append(tomli_text({action_id: keys}).strip())
    return "\n".join(lines) + "\n"


__all__ = [
    "CONFIG_FILE", "Config", "ConfigError", "default_root", "OPEN_MODES", "SETTINGS", "Setting", "config_path", "load", "parse",
    "parse_keymap", "parse_value", "remember", "set_value", "show", "write",
]
