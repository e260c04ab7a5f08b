"""The hostile corpus (tests/hostile.py) through every command and every screen, as a user would meet it.

Every shown field of the corpus holds OSC 52 (clipboard), OSC 0 (title), OSC 8 (link), CSI 2J, C1, BEL, U+202E and
markup; a transcript adds a lone surrogate. Each command's stdout and stderr, and every frame the app draws while
keys are pressed through the Sessions, Transcript, raw rows, Runs (with a repair preview), Checkpoints and native
transcript screens, must hold no raw control or bidi character, show the markup literally, and run no action.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from tests.hostile import BRACKET_PATH, CLAUDE_SESSION, CODEX_SESSION, EVIL, RUN, SESSION, assert_clean, build_hostile
from tui.cli import core as cli

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The corpus with its Claude Code and Codex transcripts captured into the session directory."""
    from store.agents.capture import capture_claude_code, capture_codex
    from store.mothx.sessiondir import open_session_dir

    hostile = build_hostile(tmp_path_factory.mktemp("hostile") / "corpus")
    with open_session_dir(hostile.sessions, OpenMode.READ_WRITE) as sd:
        capture_claude_code(sd, hostile.claude_root)
        capture_codex(sd, hostile.codex_root)
    return hostile.root


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_every_command_prints_the_corpus_safely(corpus: Path, tmp_path: Path) -> None:
    sessions = str(corpus / "sessions")
    copy = tmp_path / "rw"
    shutil.copytree(corpus / "sessions", copy)
    transcript = next((corpus / "claude-projects").rglob(f"{CLAUDE_SESSION}.jsonl"))
    commands: list[tuple[list[str], set[int]]] = [
        (["--read-only", "--dir", sessions, "list", "--all"], {0}),
        (["--read-only", "--dir", sessions, "list", "--json", "--all"], {0}),
        (["--read-only", "--dir", sessions, "list", "--search", "prompt"], {0}),
        (["--read-only", "--dir", sessions, "show", SESSION], {0}),
        (["--read-only", "--dir", sessions, "show", SESSION, "--format", "json"], {0}),
        (["--read-only", "--dir", sessions, "show", SESSION, "--raw"], {0}),
        (["--read-only", "--dir", sessions, "runs"], {0}),
        (["--read-only", "--dir", sessions, "runs", "--json"], {0}),
        (["--read-only", "--dir", sessions, "repair", "recover-run", RUN, "--dry-run"], {0, 3}),
        (["--read-only", "--dir", sessions, "repair", "release-lease", SESSION, "--dry-run"], {0, 3}),
        (["--read-only", "--dir", sessions, "repair", "recover-run", RUN, "--yes"], {3}),
        (["--read-only", "--dir", sessions, "checkpoints"], {0}),
        (["--read-only", "--dir", sessions, "checkpoint", "verify", "claude-code", CLAUDE_SESSION], {0}),
        (["--read-only", "--dir", sessions, "checkpoint", "verify", "codex", CODEX_SESSION], {0}),
        (["--dir", str(copy), "capture", "claude-code", str(corpus / "claude-projects")], {0}),
        (["--dir", str(copy), "repair", "recover-run", RUN, "--yes"], {0}),
        (["export-repaired", str(transcript), str(tmp_path / "repaired.jsonl")], {0}),
    ]
    for argv, codes in commands:
        code, out, err = _cli(*argv)
        where = " ".join(argv[3:] if argv[0].startswith("--") else argv[:1])
        assert code in codes, (where, code, err)
        assert "Traceback" not in err, where
        assert_clean(out, f"stdout of {where}")
        assert_clean(err, f"stderr of {where}")
        if "--json" in argv or "json" in argv:
            json.loads(out)
    code, out, _ = _cli("--read-only", "--dir", sessions, "list", "--json", "--all")
    titles = {row["id"]: row["title"] for row in json.loads(out)}
    assert titles[SESSION] == f"title{EVIL}title", "JSON output is exactly the data (escaped, not altered)"
    code, out, _ = _cli("--read-only", "--dir", sessions, "show", SESSION)
    assert BRACKET_PATH in out or "[archive]" in out or "[/]" in out, "markup is shown literally"
    assert (tmp_path / "repaired.jsonl").is_file()


async def _press(pilot, app, *keys: str) -> None:  # type: ignore[no-untyped-def]
    from tests.tui.appwait import settle
    from tests.tui.rendered import assert_clean as assert_drawn_clean

    for key in keys:
        await pilot.press(key)
        await settle(pilot, integrity=False)
        assert_drawn_clean(app, f"after {key!r}")
        assert app.is_running, f"{key!r} ended the app"


async def test_every_screen_draws_the_corpus_safely(corpus: Path, tmp_path: Path) -> None:
    from tests.tui.appwait import settle
    from tests.tui.rendered import drawn_text
    from tui.app import SessionscopeApp

    copy = tmp_path / "sessions"
    shutil.copytree(corpus / "sessions", copy)
    app = SessionscopeApp(copy, OpenMode.READ_WRITE)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        shown = drawn_text(app)
        assert "[@click=app.quit]" in shown and "[/]" in shown, "markup in data is drawn as it is"
        # The hostile session's transcript (it sorts first), its raw rows, back.
        await _press(pilot, app, "g", "enter", "n", "]", "G", "tab", "G", "escape")
        # Its runs: the orphaned run under a lease whose owner id holds escapes and [/]; the recovery preview.
        await _press(pilot, app, "R", "x")
        assert "[/]" in drawn_text(app)
        await _press(pilot, app, "escape", "t", "escape", "L", "escape", "escape")
        # The captured Claude Code session: the branch switch shows a hostile prompt; the raw lines.
        await _press(pilot, app, "a", "g", "enter", "b", "b", "tab", "escape")
        await _press(pilot, app, "question_mark", "escape")
        assert app.is_running
