"""``sessionscope kb ...`` and ``repair kb-clear-index``: output, JSON, exit codes, read modes, hostile data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.hostile import EVIL, assert_clean
from tui.cli import core as cli


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def sdir(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    root.mkdir()
    open_session_dir(root, OpenMode.READ_WRITE, create=True).close()
    return root


@pytest.fixture
def src(tmp_path: Path) -> Path:
    folder = tmp_path / "src"
    (folder / "pkg").mkdir(parents=True)
    (folder / "pkg" / "pool.py").write_text('"""Pools."""\n\nfrom pkg.retry import backoff\n\n\ndef grow():\n'
                                            '    return backoff(2)\n')
    (folder / "pkg" / "retry.py").write_text("def backoff(n):\n    return 2 ** n\n")
    (folder / "guide.md").write_text(f"# Guide {EVIL}\n\nbackoff explained [/] \x1b]52;c;eA==\x07\n\n## 部署流程\n\nx\n")
    (folder / f"{EVIL[:20]}.md").write_text("# hostile name\n\nbackoff\n")
    return folder


def test_index_list_query_sources(capsys: pytest.CaptureFixture[str], sdir: Path, src: Path) -> None:
    code, out, err = run(capsys, "--dir", str(sdir), "kb", "index", str(src), "--name", "My Code")
    assert code == 0, err
    assert "Created knowledge base my-code" in out and "4 files (0 reused, 4 read)" in out
    code, out, _ = run(capsys, "--dir", str(sdir), "kb", "index", str(src), "--name", "My Code")
    assert code == 0 and "4 files (4 reused, 0 read)" in out
    code, out, _ = run(capsys, "--dir", str(sdir), "kb", "list")
    assert code == 0 and "my-code" in out and "indexed" in out
    code, out, _ = run(capsys, "--dir", str(sdir), "kb", "list", "--json")
    [base] = json.loads(out)
    assert base["activeSnapshot"]["fileCount"] == 4 and base["base"]["storeVersion"] == 4
    code, out, err = run(capsys, "--dir", str(sdir), "kb", "query", "my-code", "backoff", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) >= {"chunks", "nodes", "edges", "evidence", "truncated", "uncertainties"}
    assert data["chunks"] and data["nodes"][0]["label"] == "pkg.retry.backoff"
    assert all(ev["relativePath"] for ev in data["evidence"])
    code, text, _ = run(capsys, "--dir", str(sdir), "kb", "query", "my-code", "backoff", "--candidates")
    assert code == 0 and "pkg.retry.backoff" in text and "Evidence" in text
    code, out, _ = run(capsys, "--dir", str(sdir), "kb", "sources", "my-code")
    assert code == 0 and "pkg/pool.py" in out and "4 unchanged" in out
    for chunk in (text, out):
        assert_clean(chunk)
        assert "[/]" in chunk or "[bold]" in chunk or "Guide" in chunk


@pytest.mark.parametrize("query", ['"', "*", "AND", "NEAR(", 'a" OR "b', "---"])
def test_query_with_fts_syntax_never_fails(capsys: pytest.CaptureFixture[str], sdir: Path, src: Path, query: str) -> None:
    assert run(capsys, "--dir", str(sdir), "kb", "index", str(src), "--name", "kb")[0] == 0
    code, out, err = run(capsys, "--dir", str(sdir), "kb", "query", "--json", "--", "kb", query)
    assert code == 0, err
    json.loads(out)


def test_hostile_output_is_clean(capsys: pytest.CaptureFixture[str], sdir: Path, src: Path) -> None:
    assert run(capsys, "--dir", str(sdir), "kb", "index", str(src), "--name", "kb")[0] == 0
    for argv in (("kb", "query", "kb", "guide hostile backoff"), ("kb", "query", "kb", "guide", "--json"),
                 ("kb", "sources", "kb"), ("kb", "sources", "kb", "--json"), ("kb", "list")):
        code, out, err = run(capsys, "--dir", str(sdir), *argv)
        assert code == 0, err
        assert_clean(out, " ".join(argv))
        assert_clean(err)
    code, out, _ = run(capsys, "--dir", str(sdir), "kb", "query", "kb", "guide")
    assert "[bold]b[/bold]" in out and "␛" in out


def test_exit_codes_and_read_modes(capsys: pytest.CaptureFixture[str], sdir: Path, src: Path) -> None:
    code, _, err = run(capsys, "--dir", str(sdir), "--read-only", "kb", "index", str(src), "--name", "kb")
    assert code == 3 and "read-only" in err
    assert not (sdir / "knowledge-bases").exists()
    assert run(capsys, "--dir", str(sdir), "kb", "index", str(src), "--name", "kb")[0] == 0
    code, _, err = run(capsys, "--dir", str(sdir), "kb", "query", "nope", "x")
    assert code == 2 and "no knowledge base" in err
    code, _, err = run(capsys, "--dir", str(sdir), "kb", "query", "kb", "x", "--limit", "0")
    assert code == 2
    before = digest(sdir / "knowledge-bases")
    for flag in ("--read-only", "--snapshot"):
        assert run(capsys, "--dir", str(sdir), flag, "kb", "query", "kb", "backoff")[0] == 0
        assert run(capsys, "--dir", str(sdir), flag, "kb", "list")[0] == 0
    assert digest(sdir / "knowledge-bases") == before


def test_clear_index_repair(capsys: pytest.CaptureFixture[str], sdir: Path, src: Path) -> None:
    assert run(capsys, "--dir", str(sdir), "kb", "index", str(src), "--name", "kb")[0] == 0
    code, out, _ = run(capsys, "--dir", str(sdir), "repair", "kb-clear-index", "kb", "--dry-run")
    assert code == 0 and "knowledge_index_snapshots" in out and "Dry run" in out
    code, out, err = run(capsys, "--dir", str(sdir), "--read-only", "repair", "kb-clear-index", "kb", "--yes")
    assert code == 3
    code, out, err = run(capsys, "--dir", str(sdir), "repair", "kb-clear-index", "kb", "--yes")
    assert code == 0, err
    code, _, err = run(capsys, "--dir", str(sdir), "kb", "query", "kb", "backoff")
    assert code == 1 and "unindexed" in err
    code, out, err = run(capsys, "--dir", str(sdir), "repair", "kb-clear-index", "kb", "--yes")
    assert code == 0 and "nothing to clear" in out
