"""Themes from TOML files.

A theme file in ``themes/`` names the colours of a :class:`textual.theme.Theme`::

    name = "sessionscope-dark"
    dark = true
    primary = "#5fafd7"
    ...
    [variables]
    footer-key-foreground = "#5fafd7"

The app registers every theme it finds at start-up; the chosen one is remembered as ``theme`` in
``config.toml`` (:mod:`store.config`).
"""

from __future__ import annotations

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
    ansi = data.get("ansi", False)
    if not isinstance(ansi, bool):
        raise ValueError(f"{source}: 'ansi' must be true or false.")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ValueError(f"{source}: [variables] must map names to strings.")
    theme = Theme(name=name.strip(), dark=dark, ansi=ansi, variables={str(k): str(v) for k, v in variables.items()}, **kwargs)  # type: ignore[arg-type]
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
