"""``show --format html``, ``--output`` and ``--redact`` from the command line (mothx and captured sessions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from store.redact import KINDS
from tests.hostile import CLAUDE_SESSION, SESSION, assert_clean, build_hostile
from tests.store.test_export_html import HOSTILE, SECRET, SID, WEB, build_dir, check_page
from tui import cli


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    assert_clean(out, f"stdout of {argv}")
    assert_clean(err, f"stderr of {argv}")
    return code, out, err


@pytest.fixture
def corpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    h = build_hostile(tmp_path / "h")
    assert cli.main(["--dir", str(h.sessions), "capture", "claude-code", str(h.claude_root), "--json"]) == 0
    capsys.readouterr()
    return h.sessions


def test_show_html_of_mothx_and_captured_sessions(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for sid in (SESSION, CLAUDE_SESSION):
        code, out, err = run(capsys, "--dir", str(corpus), "show", sid, "--format", "html")
        assert code == 0, err
        check_page(out)
        assert "<details" in out


def test_show_html_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sdir = build_dir(tmp_path / "s")
    target = tmp_path / "page.html"
    code, out, err = run(capsys, "--dir", str(sdir), "show", SID, "--format", "html", "--output", str(target))
    assert code == 0, err
    assert out.strip() == f"wrote {target} ({target.stat().st_size:,} bytes)"
    text = check_page(target.read_text(encoding="utf-8"))
    assert all(p in text for p in WEB)
    # an existing file is not replaced unless asked; a link is never written through
    code, _, err = run(capsys, "--dir", str(sdir), "show", SID, "--format", "html", "-o", str(target))
    assert code == 1 and "already exists" in err
    assert run(capsys, "--dir", str(sdir), "show", SID, "-o", str(target), "--replace")[0] == 0
    assert target.read_text(encoding="utf-8").startswith("# title")
    link = tmp_path / "link.html"
    link.symlink_to(tmp_path / "victim")
    code, _, err = run(capsys, "--dir", str(sdir), "show", SID, "--format", "html", "-o", str(link), "--replace")
    assert code == 1 and "symbolic link" in err and not (tmp_path / "victim").exists()


def test_raw_html_is_a_bad_argument(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sdir = build_dir(tmp_path / "s")
    code, _, err = run(capsys, "--dir", str(sdir), "show", SID, "--raw", "--format", "html")
    assert code == 2 and "--raw" in err


@pytest.mark.parametrize("fmt", ["md", "json", "html"])
def test_show_redact(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    sdir = build_dir(tmp_path / "s")
    code, out, err = run(capsys, "--dir", str(sdir), "show", SID, "--format", fmt)
    assert code == 0 and SECRET in out and not err
    code, out, err = run(capsys, "--dir", str(sdir), "show", SID, "--format", fmt, "--redact")
    assert code == 0
    assert SECRET not in out and "[REDACTED:api-key]" in out
    assert err == "sessionscope: note: redacted 2 values: 2 api-key\n"
    if fmt == "json":
        doc = json.loads(out)
        assert doc["redactions"] == {"api-key": 2}
        assert set(doc["redactions"]) <= set(KINDS)


def test_redact_raw_and_captured(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["show", SESSION, "--raw", "--redact"], ["show", CLAUDE_SESSION, "--redact", "--format", "json"],
                 ["show", CLAUDE_SESSION, "--raw", "--redact"]):
        code, out, err = run(capsys, "--dir", str(corpus), *argv)
        assert code == 0
        assert err == "sessionscope: note: redacted nothing (no value looked like a secret)\n"
    assert HOSTILE  # the payloads used by the page checks
