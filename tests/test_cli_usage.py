"""``sessionscope usage``: the table, the JSON shape, groupings, sources, --since, prices, hostile strings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from store.mothx.cells import bind
from store.mothx.sessiondir import open_session_dir
from tui.cli import main
from tui.usage_text import bar, cost, short_tokens

HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\",
           "\x1b[2J", "\x9b31m", "\x07", "\u202etxt.exe", "\ud83d", "pid-4242-[/]", "[bold]x[/bold]",
           "[link=file:///etc/passwd]x[/link]", "[@click=app.quit]x[/]", "/home/u/[archive]/repo"]
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _clean(text: str) -> None:
    assert not RAW.search(text), repr(RAW.search(text))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "sessions"
    with open_session_dir(path, create=True) as sd, sd.db.write() as conn:
        conn.executemany("INSERT INTO sessions (id, cwd) VALUES (?,?)",
                         [("s1", "/home/u/alpha"), *((f"h{i}", bind(h)) for i, h in enumerate(HOSTILE))])
        rows: list[tuple[object, ...]] = [("2026-11-01T10:00:00Z", "s1", "anthropic", "claude-a", 100, 10, 110),
                ("2026-11-02T10:00:00Z", "s1", "anthropic", "claude-a", 200, 20, 220),
                ("2026-11-02T11:00:00Z", "gone", "openai", "gpt-b", 1000, 100, 1100),
                ("2026-11-03T11:00:00Z", "s1", "openai", "gpt-b", "abc", 1, 1)]
        rows += [("2026-11-04T00:00:00Z", f"h{i}", "p", bind(h), 1, 1, 2) for i, h in enumerate(HOSTILE)]
        conn.executemany("INSERT INTO request_stats (timestamp, session_id, provider, model, input_tokens, "
                         "output_tokens, total_tokens) VALUES (?,?,?,?,?,?,?)", rows)
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    got = capsys.readouterr()
    _clean(got.out)
    _clean(got.err)
    return code, got.out, got.err


def test_usage_by_day_table(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--dir", str(root), "usage")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["DAY", "(UTC)", "REQUESTS"] and "SHARE" in lines[0] and "COST" not in lines[0]
    assert lines[1].split()[:2] == ["2026-11-01", "1"]
    day2 = lines[2].split()
    assert day2[:7] == ["2026-11-02", "2", "1,200", "120", "0", "0", "1,320"] and day2[7].startswith("█" * 16)
    assert lines[-1].split() == ["TOTAL", str(4 + len(HOSTILE)), f"{1300 + len(HOSTILE):,}",
                                 str(131 + len(HOSTILE)), "0", "0", f"{1431 + 2 * len(HOSTILE):,}"]
    assert "1 damaged token cell counted as 0" in err


def test_usage_json_shape(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dir", str(root), "usage", "--by", "session", "--json", "--source", "mothx")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"by", "source", "since", "priced", "rows", "totals", "problems"}
    assert (data["by"], data["source"], data["since"], data["priced"]) == ("session", "mothx", None, False)
    gone = next(r for r in data["rows"] if r["key"] == "gone")
    assert (gone["totalTokens"], gone["sessionExists"], gone["cwd"], gone["agent"]) == (1100, False, "", "")
    assert data["rows"][0]["key"] == "gone"  # largest first
    s1 = next(r for r in data["rows"] if r["key"] == "s1")
    assert (s1["requests"], s1["inputTokens"], s1["damagedCells"], s1["cwd"]) == (3, 300, 1, "/home/u/alpha")
    assert data["totals"]["totalTokens"] == 1431 + 2 * len(HOSTILE)
    # hostile keys parse back to exactly the data (the escapes are JSON's)
    cwds = json.loads(run(capsys, "--dir", str(root), "usage", "--by", "cwd", "--json")[1])
    assert set(HOSTILE) <= {r["key"] for r in cwds["rows"]}


def test_usage_since_model_prices(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('"claude-a" = { input = 3.0, output = 15.0 }\n')
    code, out, err = run(capsys, "--dir", str(root), "usage", "--by", "model", "--since", "2026-11-02",
                         "--prices", str(prices))
    assert code == 0
    lines = out.splitlines()
    assert "COST" in lines[0]
    claude = next(line for line in lines if line.startswith("claude-a"))
    assert claude.split()[1:3] == ["1", "200"] and "$0.0009" in claude
    gpt = next(line for line in lines if line.startswith("gpt-b"))
    assert "$" not in gpt
    assert lines[-1].startswith("TOTAL") and "$0.0009+" in lines[-1]  # some tokens had no price
    for hostile in ("pid-4242-[/]", "[bold]x[/bold]", "[@click=app.quit]x[/]"):
        assert hostile in out  # bracketed text is literal
    assert "␛]52;c;aGFja2Vk" in out  # an escape is shown, never sent


def test_usage_bad_arguments_and_empty(root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "--dir", str(root), "usage", "--since", "last week")[0] == 2
    assert run(capsys, "--dir", str(root), "usage", "--by", "week")[0] == 2
    assert run(capsys, "--dir", str(root), "usage", "--source", "\x1b]0;x\x07")[0] == 2
    code, out, _ = run(capsys, "--dir", str(root), "usage", "--source", "captured")
    assert code == 0 and out.startswith("No usage recorded (captured).")
    code, out, _ = run(capsys, "--dir", str(root), "usage", "--since", "2027-01-01", "--json")
    assert code == 0 and json.loads(out)["rows"] == []
    bad = tmp_path / "bad.toml"
    bad.write_text('"\\u001b]0;x" = 3\n')  # a TOML escape: the name holds ESC
    code, out, err = run(capsys, "--dir", str(root), "usage", "--prices", str(bad))
    assert code == 0 and "is not a table" in err


def test_usage_reads_only(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(p.name for p in root.iterdir())
    stamp = (root / "sessions.db").stat().st_mtime_ns
    for mode in ([], ["--read-only"], ["--snapshot"]):
        assert run(capsys, "--dir", str(root), *mode, "usage", "--by", "cwd")[0] == 0
    assert sorted(p.name for p in root.iterdir()) == before
    assert (root / "sessions.db").stat().st_mtime_ns == stamp


def test_text_helpers() -> None:
    assert bar(0, 10, 8) == "" and bar(10, 10, 8) == "█" * 8 and bar(1, 1000, 8) == "▏"
    assert bar(5, 10, 3) == "█▌" and bar(20, 10, 4) == "████"
    assert short_tokens(999) == "999" and short_tokens(12_345) == "12.3k" and short_tokens(4_560_000) == "4.56M"
    assert cost(None) == "" and cost(0.0036) == "$0.0036" and cost(12.4, partial=True) == "$12.40+"
