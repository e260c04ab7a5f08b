"""Fixtures for the app's Pilot and snapshot tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def demo_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo session directory, built once per test run (read it; copy it before writing)."""
    from store.demo import build_demo

    return build_demo(tmp_path_factory.mktemp("demo-master") / "sessions")


@pytest.fixture
def demo_dir(demo_master: Path, tmp_path: Path) -> Path:
    """A private copy of the demo directory for one test."""
    target = tmp_path / "sessions"
    shutil.copytree(demo_master, target)
    return target
