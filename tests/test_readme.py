"""The README documents what exists: its key map is the action registry's, its screenshots are files."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tui.keymapdoc import END, START

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_key_map_matches_the_action_registry() -> None:
    text = README.read_text(encoding="utf-8")
    block = text.split(START, 1)[1].split(END, 1)[0]
    # A fresh process: other tests register actions of their own in this one.
    generated = subprocess.run([sys.executable, "-m", "tui.keymapdoc"], capture_output=True, text=True, check=True,
                               cwd=README.parent).stdout
    assert block.strip() == generated.strip(), "run: .venv/bin/python -m tui.keymapdoc --write README.md"


def test_readme_screenshots_exist() -> None:
    text = README.read_text(encoding="utf-8")
    shots = re.findall(r"\]\((screenshots/[^)]+\.svg)\)", text)
    assert shots, "the README shows no screenshots"
    for shot in shots:
        assert (README.parent / shot).is_file(), shot
