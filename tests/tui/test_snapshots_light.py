"""The main screens in the light theme (the README gallery shows both themes): each test is the default-theme
snapshot test of its screen, run with ``theme = "sessionscope-light"`` in config.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from store import config
from tests.tui import (
    test_snapshots_checkpoints,
    test_snapshots_deliveries,
    test_snapshots_forks,
    test_snapshots_health,
    test_snapshots_knowledge,
    test_snapshots_native,
    test_snapshots_runs,
    test_snapshots_search,
    test_snapshots_sessions,
    test_snapshots_transcript,
    test_snapshots_usage,
)
from tests.tui.test_snapshots_checkpoints import checkpoint_dir  # noqa: F401 - a fixture
from tests.tui.test_snapshots_native import native_dir  # noqa: F401 - a fixture
from tests.tui.test_snapshots_transcript import DemoSessions, demo_sessions  # noqa: F401 - a fixture


@pytest.fixture(autouse=True)
def _light() -> None:
    config.set_value("theme", "sessionscope-light")


@pytest.fixture
def _no_prices(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr("store.usage.prices.prices_path", lambda: tmp_path / "no-prices.toml")


def test_sessions_light(snap_compare, demo_home: Path) -> None:
    test_snapshots_sessions.test_sessions_screen(snap_compare, demo_home)


def test_transcript_light(snap_compare, demo_home: Path, demo_sessions: DemoSessions) -> None:  # noqa: F811
    test_snapshots_transcript.test_transcript_tool_calls_and_error(snap_compare, demo_home, demo_sessions)


def test_runs_light(snap_compare, demo_home: Path) -> None:
    test_snapshots_runs.test_runs_screen(snap_compare, demo_home)


def test_deliveries_light(snap_compare, demo_home: Path) -> None:
    test_snapshots_deliveries.test_deliveries_screen(snap_compare, demo_home)


def test_health_light(snap_compare, demo_home: Path) -> None:
    test_snapshots_health.test_health_screen(snap_compare, demo_home)


def test_forks_light(snap_compare, demo_home: Path) -> None:
    test_snapshots_forks.test_forks_screen(snap_compare, demo_home)


def test_knowledge_light(snap_compare, demo_home: Path) -> None:
    test_snapshots_knowledge.test_knowledge_query(snap_compare, demo_home)


def test_search_light(snap_compare, demo_home: Path) -> None:
    test_snapshots_search.test_search_screen(snap_compare, demo_home)


@pytest.mark.usefixtures("_no_prices")
def test_usage_light(snap_compare, demo_home: Path) -> None:
    test_snapshots_usage.test_usage_by_session(snap_compare, demo_home)


def test_help_light(snap_compare, demo_home: Path) -> None:
    test_snapshots_sessions.test_help_screen(snap_compare, demo_home)


def test_checkpoints_light(snap_compare, checkpoint_dir: Path) -> None:  # noqa: F811
    test_snapshots_checkpoints.test_checkpoints_screen(snap_compare, checkpoint_dir)


def test_native_light(snap_compare, native_dir: Path) -> None:  # noqa: F811
    test_snapshots_native.test_branched_claude_code_transcript(snap_compare, native_dir)
