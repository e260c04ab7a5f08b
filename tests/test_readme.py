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


SNAPSHOTS = README.parent / "tests" / "tui" / "__snapshots__"
SCREENSHOT_SOURCES = {
    "sessions.svg": "test_snapshots_sessions/test_sessions_screen.svg",
    "help.svg": "test_snapshots_sessions/test_help_screen.svg",
    "transcript.svg": "test_snapshots_transcript/test_transcript_tool_calls_and_error.svg",
    "transcript-raw.svg": "test_snapshots_transcript/test_transcript_raw_view.svg",
    "runs.svg": "test_snapshots_runs/test_runs_screen.svg",
    "repair-dialog.svg": "test_snapshots_runs/test_repair_dialog.svg",
    "checkpoints.svg": "test_snapshots_checkpoints/test_checkpoints_screen.svg",
    "native-branches.svg": "test_snapshots_native/test_branched_claude_code_transcript.svg",
    "forks.svg": "test_snapshots_forks/test_forks_screen.svg",
    "deliveries.svg": "test_snapshots_deliveries/test_deliveries_screen.svg",
    "knowledge.svg": "test_snapshots_knowledge/test_knowledge_query.svg",
    "health.svg": "test_snapshots_health/test_health_screen.svg",
    "search.svg": "test_snapshots_search/test_search_screen.svg",
    "usage.svg": "test_snapshots_usage/test_usage_by_session.svg",
    "sessions-light.svg": "test_snapshots_light/test_sessions_light.svg",
    "transcript-light.svg": "test_snapshots_light/test_transcript_light.svg",
    "runs-light.svg": "test_snapshots_light/test_runs_light.svg",
    "deliveries-light.svg": "test_snapshots_light/test_deliveries_light.svg",
    "forks-light.svg": "test_snapshots_light/test_forks_light.svg",
    "knowledge-light.svg": "test_snapshots_light/test_knowledge_light.svg",
    "health-light.svg": "test_snapshots_light/test_health_light.svg",
    "search-light.svg": "test_snapshots_light/test_search_light.svg",
    "usage-light.svg": "test_snapshots_light/test_usage_light.svg",
    "checkpoints-light.svg": "test_snapshots_light/test_checkpoints_light.svg",
    "native-branches-light.svg": "test_snapshots_light/test_native_light.svg",
    "help-light.svg": "test_snapshots_light/test_help_light.svg",
}
"""Each README screenshot is a copy of an accepted snapshot, so it shows what the current code draws."""


def test_every_screenshot_is_an_accepted_snapshot() -> None:
    shots = {p.name for p in (README.parent / "screenshots").glob("*.svg")}
    assert shots == set(SCREENSHOT_SOURCES), "every screenshot needs its snapshot source listed here"
    for name, source in SCREENSHOT_SOURCES.items():
        shot = (README.parent / "screenshots" / name).read_bytes()
        assert shot == (SNAPSHOTS / source).read_bytes(), (
            f"screenshots/{name} differs from its snapshot: cp tests/tui/__snapshots__/{source} screenshots/{name}")


def test_ci_runs_exactly_the_readme_test_command() -> None:
    text = README.read_text(encoding="utf-8")
    block = text.split("**Run the checks and the tests**", 1)[1].split("```sh", 1)[1].split("```", 1)[0].strip()
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1].strip()
    assert ci == block, "README's test command and .ci/run's must be the same line"
