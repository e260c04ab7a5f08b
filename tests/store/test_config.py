"""config.toml: read and checked key by key, written atomically keeping every other setting, the older
settings.toml and keymap.toml folded in once, and ``sessionscope config path|show|set``."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from store import config
from tui.cli.core import main


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / ".config"))
    return tmp_path


def test_round_trip_keeps_every_other_setting(home: Path) -> None:
    path = config.config_path()
    assert path == home / ".config" / "sessionscope" / "config.toml"
    config.set_value("theme", "sessionscope-light")
    config.set_value("mouse", "off")
    config.set_value("time_zone", "Europe/Berlin")
    config.set_value("keymap.app.quit", "x, ctrl+x")
    loaded = config.load()
    assert loaded.problems == ()
    assert loaded.get("theme") == "sessionscope-light"
    assert loaded.get("mouse") is False
    assert loaded.get("time_zone") == "Europe/Berlin"
    assert loaded.get("open_mode") == "read-write"  # unset: the default
    assert loaded.keymap == {"app.quit": "x,ctrl+x"}
    config.remember("theme", "sessionscope-contrast")
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert data == {"theme": "sessionscope-contrast", "mouse": False, "time_zone": "Europe/Berlin",
                    "keymap": {"app.quit": "x,ctrl+x"}}
    assert [p.name for p in path.parent.iterdir()] == ["config.toml"]  # no temporary file left


def test_unknown_keys_and_bad_values_are_reported_by_name_and_the_defaults_apply(home: Path) -> None:
    path = config.config_path()
    path.parent.mkdir(parents=True)
    path.write_text('thme = "x"\nmouse = "yes"\nopen_mode = "rw"\ntime_zone = "Mars/Olympus"\n'
                    'date_format = "no percent"\ntheme = "sessionscope-light"\n[keymap]\n"app.quit" = ""\n'
                    'sessions.filter = "F"\n', encoding="utf-8")
    loaded = config.load()
    text = "\n".join(loaded.problems)
    for name in ("'thme'", "mouse must be", "open_mode must be", "time_zone must be", "date_format must be",
                 "'app.quit'"):
        assert name in text, name
    assert len(loaded.problems) == 6
    assert loaded.get("mouse") is True and loaded.get("open_mode") == "read-write"
    assert loaded.get("theme") == "sessionscope-light"
    assert loaded.keymap == {"sessions.filter": "F"}


def test_a_file_that_is_not_toml_is_one_problem_and_a_change_refuses_to_overwrite_it(home: Path) -> None:
    path = config.config_path()
    path.parent.mkdir(parents=True)
    path.write_text("theme = \n", encoding="utf-8")
    loaded = config.load()
    assert len(loaded.problems) == 1 and "not valid TOML" in loaded.problems[0]
    with pytest.raises(config.ConfigError, match="fix or remove it first"):
        config.set_value("theme", "x")
    config.remember("theme", "x")  # the app does not overwrite the user's broken file
    assert path.read_text(encoding="utf-8") == "theme = \n"


def test_the_older_files_are_folded_in_once(home: Path) -> None:
    folder = home / ".config" / "sessionscope"
    folder.mkdir(parents=True)
    (folder / "settings.toml").write_text('theme = "sessionscope-light"\n', encoding="utf-8")
    (folder / "keymap.toml").write_text('[keymap]\n"app.quit" = "x"\n', encoding="utf-8")
    loaded = config.load()
    assert loaded.migrated == ("settings.toml", "keymap.toml")
    assert loaded.get("theme") == "sessionscope-light" and loaded.keymap == {"app.quit": "x"}
    assert sorted(p.name for p in folder.iterdir()) == ["config.toml", "keymap.toml.migrated",
                                                         "settings.toml.migrated"]
    again = config.load()
    assert again.migrated == () and again.keymap == {"app.quit": "x"}


def test_set_refuses_an_unknown_setting_and_a_bad_value(home: Path) -> None:
    with pytest.raises(config.ConfigError, match="no setting 'thme'"):
        config.set_value("thme", "x")
    with pytest.raises(config.ConfigError, match="open_mode must be"):
        config.set_value("open_mode", "rw")
    assert not config.config_path().exists()


def test_cli_config_path_show_set(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(config.config_path())
    assert main(["config", "set", "open_mode", "snapshot"]) == 0
    assert main(["config", "set", "keymap.app.quit", "x"]) == 0
    capsys.readouterr()
    assert main(["config", "show", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["settings"]["open_mode"] == "snapshot" and shown["set"] == ["open_mode"]
    assert shown["keymap"] == {"app.quit": "x"} and shown["problems"] == []
    assert main(["config", "set", "keymap.app.nope", "x"]) == 2
    assert "no action 'app.nope'" in capsys.readouterr().err
    assert main(["config", "set", "mouse", "maybe"]) == 2
    assert "mouse must be true or false" in capsys.readouterr().err


def test_cli_show_reports_problems_with_status_1_and_hostile_keys_stay_safe(
        home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = config.config_path()
    path.parent.mkdir(parents=True)
    path.write_text('"\\u001b]52;c;aGFja2Vk\\u0007" = 1\n[keymap]\n"app.[/]" = "x"\n', encoding="utf-8")
    assert main(["config", "show"]) == 1
    captured = capsys.readouterr()
    assert "\x1b" not in captured.err and "\x07" not in captured.err
    assert "unknown setting '␛]52;c;aGFja2Vk␇'" in captured.err
    assert "no action 'app.[/]'" in captured.err


def test_prices_live_in_config_toml(home: Path) -> None:
    from store.usage.prices import load_prices

    path = config.config_path()
    path.parent.mkdir(parents=True)
    path.write_text('[prices]\n"claude-sonnet-*" = { input = 3.0, output = 15.0 }\n', encoding="utf-8")
    loaded = config.load()
    assert loaded.problems == () and "claude-sonnet-*" in loaded.prices
    table = load_prices()
    assert table.path == str(path) and table.problems == ()
    assert table.find("claude-sonnet-4-5") is not None
