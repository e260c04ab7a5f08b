"""``sessionscope config``: where the configuration lives, what it says, and changing one setting
(a :data:`tui.cli.core.COMMAND_MODULES` module).

    sessionscope config path                 the file (it need not exist yet)
    sessionscope config show [--json]        every setting in effect (set, or the default), and the keymap
    sessionscope config set KEY VALUE        one setting (or keymap.ACTION_ID) written to the file

Exit status: 0; 1 when the file holds problems (``show`` prints them on stderr) or cannot be written; 2 for an
unknown setting or a value it does not take.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tui.cli.output import err, json_out, out, out_text


def register(sub: argparse._SubParsersAction, add_location: Callable[..., None]) -> None:
    config = sub.add_parser("config", help="show or change the configuration (config.toml)",
                            description="The configuration file: its path, the settings in effect, or one "
                                        "setting changed. Unknown keys and bad values are reported by name.")
    actions = config.add_subparsers(dest="config_action", metavar="ACTION",
                                    parser_class=getattr(sub, "_parser_class", argparse.ArgumentParser))
    actions.required = True
    path = actions.add_parser("path", help="print where config.toml is (or would be)")
    path.set_defaults(handler=cmd_config)
    show = actions.add_parser("show", help="print every setting in effect and the keymap overrides")
    show.add_argument("--json", action="store_true", help="print a JSON object")
    show.set_defaults(handler=cmd_config)
    put = actions.add_parser("set", help="change one setting (or keymap.ACTION_ID) in config.toml",
                             description="Write one setting to config.toml, keeping every other one. KEY is a "
                                         "setting (see `config show`) or keymap.ACTION_ID (the README's key map "
                                         "lists the ids), e.g. `config set keymap.app.quit x`.")
    put.add_argument("key", metavar="KEY")
    put.add_argument("value", metavar="VALUE")
    put.set_defaults(handler=cmd_config)


def _unknown_actions(keymap: dict[str, str]) -> list[str]:
    from tui.actions import unknown_ids

    return unknown_ids(keymap)


def cmd_config(args: argparse.Namespace) -> int:
    from store import config

    if args.config_action == "path":
        out(config.config_path())
        return 0
    if args.config_action == "set":
        from tui.cli.core import UsageError

        if args.key.startswith("keymap.") and _unknown_actions({args.key.removeprefix("keymap."): "x"}):
            raise UsageError(f"there is no action '{args.key.removeprefix('keymap.')}' (the README's key map "
                             "lists the ids)")
        try:
            loaded = config.set_value(args.key, args.value)
        except config.ConfigError as exc:
            raise UsageError(str(exc)) from exc
        out(f"{args.key} = {args.value} (in {loaded.path})")
        return 0
    loaded = config.load()
    problems = [*loaded.problems, *(f"{loaded.path}: there is no action '{a}' in [keymap]."
                                    for a in _unknown_actions(loaded.keymap))]
    if args.json:
        json_out({"path": str(loaded.path),
                  "settings": {s.name: loaded.get(s.name) for s in config.SETTINGS},
                  "set": sorted(loaded.values), "keymap": loaded.keymap, "problems": problems})
    else:
        out_text(config.show(loaded))
    for problem in problems:
        err(problem)
    return 1 if problems else 0


__all__ = ["register", "cmd_config"]
