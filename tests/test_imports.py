"""The store is a library without a UI: importing every store module must not import Textual (nor the tui package)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def store_modules() -> list[str]:
    names = []
    for p in (ROOT / "store").rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


def test_store_modules_import_without_textual() -> None:
    modules = store_modules()
    assert "store.mothx.sessions" in modules and "store.mothx.db" in modules
    code = (
        "import importlib, json, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tui'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    ui_modules = json.loads(result.stdout.strip().splitlines()[-1])
    assert ui_modules == [], f"store imports UI modules: {ui_modules}"


def test_the_app_module_does_not_import_sqlmodel() -> None:
    """The first screen must not pay for SQLModel (~360 ms): tui.app and the Sessions screen import without it."""
    code = (
        "import json, sys\n"
        "import tui.app, tui.screens.sessions, tui.widgets.session_list\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('sqlmodel', 'sqlalchemy'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []
