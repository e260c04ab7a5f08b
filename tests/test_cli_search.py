"""``sessionscope search``: ranked hits, JSON, limits, captured records, hostile data and hostile queries."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.test_search import FTS_SYNTAX, HOSTILE, _capture_small, corpus
from tests.store.test_sessions import new_dir
from tui.cli import core as cli

UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


@pytest.fixture
def sdir(tmp_path: Path) -> Iterator[Path]:
    w = new_dir(tmp_path / "sessions")
    corpus(w)
    w.session("h" + HOSTILE[1] + "[/]", t=9)
    for bad in HOSTILE:
        w.user("h" + HOSTILE[1] + "[/]", f"hostile {bad} marker")
    w.close()
    yield w.root


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    for text in (out, err):
        assert UNSAFE.search(text) is None, text
        assert "Traceback" not in text
    return code, out, err


def test_search_table(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--dir", str(sdir), "search", "parser")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["SCORE", "SESSION", "SEQ"]
    assert lines[1].split()[1] == "s-many" and lines[2].split()[1] == "s-once"
    assert "»parser«" in lines[1]
    assert "2 of 2 sessions (ranked by the search index)" in err


def test_search_json_and_limit(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dir", str(sdir), "search", "parser", "--json", "--limit", "1")
    assert code == 0
    obj = json.loads(out)
    assert obj["source"] == "index" and obj["total"] == 2 and obj["has_more"] is True
    assert obj["scanned"] is False and obj["unranked"] == 0  # (a read mode of a team store far behind: True, N)
    (hit,) = obj["hits"]
    assert hit["session_id"] == "s-many" and hit["role"] == "user" and hit["matches"] == 5 and hit["entry_id"]
    a, b = hit["spans"][0]
    assert hit["snippet"][a:b] == "parser" and hit["score"] < 0
    code, out, _ = run(capsys, "--dir", str(sdir), "search", '"connection pool"', "--json", "--limit", "0")
    assert [h["session_id"] for h in json.loads(out)["hits"]] == ["s-phrase"]
    code, _, err = run(capsys, "--dir", str(sdir), "search", "x", "--limit", "-1")
    assert code == 2


def test_search_captured(sdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _capture_small(tmp_path, sdir)
    code, out, err = run(capsys, "--dir", str(sdir), "search", "walrus", "--captured")
    assert code == 0 and out.splitlines()[1].split()[1:3] == ["codex", "abc"]
    assert "agent sessions" in err
    code, out, _ = run(capsys, "--dir", str(sdir), "search", "walrus", "--captured", "--json")
    hit = json.loads(out)["hits"][0]
    assert hit["agent_id"] == "codex" and hit["file_path"].endswith(".jsonl") and hit["line_number"] > 0


def test_search_hostile_data_and_queries(sdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dir", str(sdir), "search", "marker")
    assert code == 0 and "[/]" in out and "␛" in out
    code, out, _ = run(capsys, "--dir", str(sdir), "search", "marker", "--json")
    obj = json.loads(out)
    assert obj["hits"][0]["session_id"] == "h" + HOSTILE[1] + "[/]"     # JSON parses back to the data
    for text in FTS_SYNTAX + HOSTILE:
        if text.startswith("-") or "\x00" in text:
            argv = ["--dir", str(sdir), "search", "--", text]
        else:
            argv = ["--dir", str(sdir), "search", text]
        code, _, _ = run(capsys, *argv)
        assert code in (0, 2), text


def test_search_reports_the_like_scan(sdir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    before = sorted(os.listdir(sdir))
    code, out, err = run(capsys, "--dir", str(sdir), "search", "parser")
    assert code == 0 and "LIKE scan" in err and "s-many" in out
    assert sorted(os.listdir(sdir)) == before


def test_snippet_line_keeps_the_spaces_beside_a_match_and_stays_safe() -> None:
    from store.search.results import SearchHit, Snippet
    from tui.cli.search import snippet_line

    text = "a capybara grazes\nby the \x1b]52;c;eA==\x07 river"
    start = text.index("capybara")
    hit = SearchHit("s", -1.0, -1.0, 1, snippet=Snippet(text, ((start, start + len("capybara")),)))
    line = snippet_line(hit)
    assert line.startswith("a »capybara« grazes by the ")
    assert "\n" not in line and UNSAFE.search(line) is None and "\x1b" not in line
