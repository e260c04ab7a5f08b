"""The README documents what exists: its key map is the action registry's, its screenshots are files."""

from __future__ import annotations

import re
from pathlib import Path

from tui.keymapdoc import END, START, keymap_markdown

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_key_map_matches_the_action_registry() -> None:
    text = README.read_text(encoding="utf-8")
    block = text.split(START, 1)[1].split(END, 1)[0]
    assert block.strip() == keymap_markdown().strip(), "run: .venv/bin/python -m tui.keymapdoc --write README.md"


def test_readme_screenshots_exist() -> None:
    text = README.read_text(encoding="utf-8")
    shots = re.findall(r"\]\((screenshots/[^)]+\.svg)\)", text)
    assert shots, "the README shows no screenshots"
    for shot in shots:
        assert (README.parent / shot).is_file(), shot
