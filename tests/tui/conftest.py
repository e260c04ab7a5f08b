"""Fixtures for the app's Pilot and snapshot tests."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest


DEMO_MASTER = Path(tempfile.gettempdir()) / "sessionscope-tests" / "demo" / "sessions"


@pytest.fixture(scope="session")
def demo_master() -> Path:
    """The demo session directory at a fixed path (so snapshots show the same path on every run).

    Open it only in a read mode, or copy it first with ``demo_dir``: tests must not write to it.
    """
    from store.demo.build import ensure_demo

    return ensure_demo(DEMO_MASTER)


@pytest.fixture
def demo_dir(demo_master: Path, tmp_path: Path) -> Path:
    """A private copy of the demo directory for one test."""
    target = tmp_path / "sessions"
    shutil.copytree(demo_master, target)
    return target
