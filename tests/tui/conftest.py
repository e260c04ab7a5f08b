"""Fixtures for the app's Pilot and snapshot tests.

Everything is built fresh under pytest's temporary folders from the current code: nothing is cached between
runs, so a test never shows a demo the generator no longer builds.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def demo_master(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo session directory, built once per test run from the current generator.

    Open it only in a read mode, or copy it first with ``demo_dir``: tests must not write to it.
    """
    from store.demo.build import build_demo

    return build_demo(tmp_path_factory.mktemp("demo-master") / "sessions")


def copy_demo(demo_master: Path, target: Path) -> Path:
    """Copy the demo to ``target`` as the builder wrote it: an empty ``-wal`` (and its ``-shm``) that a read of the
    master by an earlier test may have left holds nothing, and is not copied (a screen that shows the files, such
    as Health, then draws the same picture whatever ran before)."""
    wal = demo_master / "sessions.db-wal"
    quiet = not wal.exists() or wal.stat().st_size == 0
    skip = shutil.ignore_patterns("sessions.db-wal", "sessions.db-shm") if quiet else None
    shutil.copytree(demo_master, target, ignore=skip)
    return target


@pytest.fixture
def demo_dir(demo_master: Path, tmp_path: Path) -> Path:
    """A private copy of the demo directory for one test."""
    return copy_demo(demo_master, tmp_path / "sessions")


@pytest.fixture
def demo_home(demo_master: Path) -> Path:
    """A private copy of the demo where ``--demo`` puts it (``~/.cache/sessionscope/demo/sessions`` under the
    test's own home), so a screen shows the same ``~/…`` path on every machine, whatever ``TMPDIR`` is."""
    target = Path(os.environ["HOME"]) / ".cache" / "sessionscope" / "demo" / "sessions"
    target.parent.mkdir(parents=True, exist_ok=True)
    return copy_demo(demo_master, target)
