"""`sessionscope` with no command: the app on the named directory, or on a team store alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from tui.cli.core import main


class Launched(Exception):
    pass


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Path | None, OpenMode, bool]]:
    """What the app was started on (it is not run): its directory, mode and whether the directory existed."""
    from tui.app import SessionscopeApp

    seen: list[tuple[Path | None, OpenMode, bool]] = []

    def run(self: SessionscopeApp, *args: object, **kwargs: object) -> None:
        root = self.session_dir
        seen.append((root, self.mode, root is not None and (root / "sessions.db").is_file()))

    monkeypatch.setattr(SessionscopeApp, "run", run)
    return seen


def test_a_team_store_without_a_session_directory_opens_read_only_on_an_empty_private_one(
        launched: list[tuple[Path | None, OpenMode, bool]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SESSIONSCOPE_STORE", f"sqlite:///{tmp_path / 'team.db'}")
    assert main([]) == 0
    [(root, mode, existed)] = launched
    assert root is not None and existed and mode is OpenMode.READ_ONLY
    assert not root.exists(), "the private folder is removed when the app ends"
    assert not (Path.home() / ".mothx").exists()


def test_without_a_store_or_a_directory_the_app_opens_its_welcome(
        launched: list[tuple[Path | None, OpenMode, bool]], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SESSIONSCOPE_STORE", raising=False)
    assert main([]) == 0
    assert launched == [(None, OpenMode.READ_WRITE, False)]
