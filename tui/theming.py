"""Themes from TOML files, and the user's remembered settings.

A theme file in ``themes/`` names the colours of a :class:`textual.theme.Theme`::

    name = "sessionscope-dark"
    dark = true
    primary = "#5fafd7"
    ...
    [variables]
    footer-key-foreground = "#5fafd7"

The app registers every theme it finds at start-up; the chosen one is remembered in
``config_dir()/settings.toml`` (``theme = "<name>"``), written with tomli-w.
"""

from __future__ import annotations

import os
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from textual.theme import Theme

DEFAULT_THEME = "sessionscope-dark"
THEMES_DIR = Path(__file__).resolve().parent.parent / "themes"

_COLOUR_FIELDS = (
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
)


@dataclass(frozen=True)
class ThemeLoad:
    themes: list[Theme] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def parse_theme(data: dict[str, object], source: str) -> Theme:
    """A :class:`Theme` from the parsed TOML of one theme file; ``ValueError`` with one sentence when wrong."""
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{source} has no 'name'.")
    if not isinstance(data.get("primary"), str):
        raise ValueError(f"{source} has no 'primary' colour.")
    kwargs: dict[str, object] = {}
    for key in _COLOUR_FIELDS:
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ValueError(f"{source}: '{key}' must be a colour string.")
        kwargs[key] = value
    dark = data.get("dark", True)
    if not isinstance(dark, bool):
        raise ValueError(f"{source}: 'dark' must be true or false.")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ValueError(f"{source}: [variables] must map names to strings.")
    theme = Theme(name=name.strip(), dark=dark, variables={str(k): str(v) for k, v in variables.items()}, **kwargs)  # type: ignore[arg-type]
    try:
        theme.to_color_system()  # validates every colour now, not at the first repaint
    except Exception as exc:  # noqa: BLE001 - Textual raises several colour parse errors
        raise ValueError(f"{source}: {exc}") from exc
    return theme


def load_theme_file(path: Path) -> Theme:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path.name} is not valid TOML: {exc}.") from exc
    return parse_theme(data, path.name)


def load_themes(folder: Path = THEMES_DIR) -> ThemeLoad:
    """Every ``*.toml`` theme in ``folder``, sorted by file name; broken files are reported, not fatal."""
    themes: list[Theme] = []
    problems: list[str] = []
    if not folder.is_dir():
        return ThemeLoad(themes, [f"The themes folder {folder} does not exist."])
    for path in sorted(folder.glob("*.toml")):
        try:
            themes.append(load_theme_file(path))
        except (OSError, ValueError) as exc:
            problems.append(str(exc))
    return ThemeLoad(themes, problems)


# --- settings.toml ----------------------------------------------------------------------------------------------


def settings_path() -> Path:
    from store.paths import config_dir

    return config_dir() / "settings.toml"


def read_settings(path: Path | None = None) -> dict[str, object]:
    """The settings table; empty when the file is missing or unreadable (a broken file is not fatal)."""
    path = settings_path() if path is None else path
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def remembered_theme(path: Path | None = None) -> str | None:
    value = read_settings(path).get("theme")
    return value if isinstance(value, str) and value else None


def remember_theme(name: str, path: Path | None = None) -> None:
    """Write ``theme = name`` into settings.toml, keeping every other setting; atomic replace."""
    import tomli_w

    path = settings_path() if path is None else path
    settings = read_settings(path)
    if settings.get("theme") == name:
        return
    settings["theme"] = name
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".settings-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            tomli_w.dump(settings, fh)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
