"""The README's key map, generated from the one action registry (so the document cannot drift from the keys).

    .venv/bin/python -m tui.keymapdoc --write README.md     rewrite the block between the KEYMAP markers
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from tui import actions

START, END = "<!-- KEYMAP-START -->", "<!-- KEYMAP-END -->"

KEY_NAMES = {
    "question_mark": "?", "colon": ":", "slash": "/", "escape": "esc", "right_square_bracket": "]",
    "left_square_bracket": "[", "space": "space", "pagedown": "pgdn", "pageup": "pgup", "enter": "enter",
}


def pretty_key(keys: str) -> str:
    return " ".join(f"`{KEY_NAMES.get(k.strip(), k.strip())}`" for k in keys.split(","))


def keymap_markdown() -> str:
    """One table per scope: key, what it does, the action id to remap it by."""
    by_scope: dict[str, list[actions.ActionSpec]] = {}
    for spec in actions.all_actions():
        by_scope.setdefault(spec.scope, []).append(spec)
    parts: list[str] = []
    order = list(actions.SCOPE_TITLES)
    scopes = sorted(by_scope, key=lambda sc: (order.index(sc) if sc in order else len(order), sc))
    for scope in scopes:
        specs = by_scope[scope]
        parts.append(f"**{actions.SCOPE_TITLES.get(scope, scope)}**\n")
        parts.append("| key | does | id |\n| --- | --- | --- |")
        for spec in specs:
            writes = " *(repair: disabled in read modes)*" if spec.writes else ""
            parts.append(f"| {pretty_key(spec.key)} | {spec.tooltip}{writes} | `{spec.id}` |")
        parts.append("")
    return "\n".join(parts).rstrip() + "\n"


def replace_block(text: str, block: str) -> str:
    pattern = re.compile(re.escape(START) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError("the README has no KEYMAP markers")
    return pattern.sub(lambda _m: f"{START}\n{block}{END}", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print (or write into a README) the key map.")
    parser.add_argument("--write", type=Path, default=None)
    args = parser.parse_args(argv)
    block = keymap_markdown()
    if args.write is None:
        print(block, end="")
        return 0
    args.write.write_text(replace_block(args.write.read_text(encoding="utf-8"), block), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
