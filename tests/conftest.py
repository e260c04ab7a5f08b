"""Hermetic test settings: no colour overrides, no animations, no user config, fixed cache dir."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

# CI runs every property test on a fixed sequence of examples (a submission's result must not depend on luck);
# a developer's run explores new random examples each time and reports any it finds.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

for _name in list(os.environ):
    if _name.startswith("TEXTUAL_") or _name in ("NO_COLOR", "FORCE_COLOR", "MOTHX_DIR", "MOTHX_RUNTIME_BUS_PORT"):
        del os.environ[_name]
os.environ["TEXTUAL_ANIMATIONS"] = "none"

SHARED_FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"


@pytest.fixture(autouse=True)
def _hermetic_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Config, cache and home point into a private folder so a developer's own files never change results."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.delenv("MOTHX_DIR", raising=False)
    # The app has run before in this home (no first-run hint in the status bar; test_first_run removes it).
    seen = home / ".local" / "share" / "sessionscope" / "first-run-done"
    seen.parent.mkdir(parents=True, exist_ok=True)
    seen.touch()


@pytest.fixture
def real_fixtures() -> Path:
    """The real agent transcripts in ../shared/fixtures/real; the test is skipped where they are absent."""
    if not SHARED_FIXTURES.is_dir():
        pytest.skip("../shared/fixtures/real is not present")
    return SHARED_FIXTURES
