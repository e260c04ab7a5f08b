"""``--csv`` beside ``--json`` on every list command: the same objects, safe cells, no formula injection."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.hostile import SESSION, assert_clean, build_hostile
from tui import cli
from tui.cli.output import csv_cell, csv_text

LISTS = [["list", "--all"], ["runs"], ["checkpoints"], ["deliveries"], ["doctor"]]


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


def _json_records(doc: object) -> list[dict[str, object]]:
    if isinstance(doc, dict):
        key = "deliveries" if "deliveries" in doc else "checks"
        doc = doc[key]
    assert isinstance(doc, list)
    return doc


@pytest.mark.parametrize("argv", LISTS, ids=[a[0] for a in LISTS])
def test_csv_has_the_json_objects(corpus: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    jcode, jout, _ = run(capsys, "--dir", str(corpus), *argv, "--json")
    ccode, cout, _ = run(capsys, "--dir", str(corpus), *argv, "--csv")
    assert jcode == ccode
    records = _json_records(json.loads(jout))
    rows = list(csv.DictReader(io.StringIO(cout, newline="")))
    assert len(rows) == len(records)
    if records:
        assert list(rows[0]) == list(records[0])
        for row, rec in zip(rows, records, strict=True):
            for key, value in rec.items():
                if key == "lease":  # its seconds_left is counted from "now": two runs may differ by a second
                    continue
                assert row[key] == csv_cell(value), (key, row[key], value)
    for row in rows:
        for cell in row.values():
            assert not cell.startswith(("=", "+", "-", "@")), cell


def test_csv_and_json_together_is_a_bad_argument(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--dir", str(corpus), "list", "--json", "--csv")
    assert code == 2 and not out and "--csv" in err


def test_hostile_session_row(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "--dir", str(corpus), "list", "--all", "--csv")
    row = next(r for r in csv.DictReader(io.StringIO(out, newline="")) if r["id"] == SESSION)
    assert "␛]52;c;" in row["cwd"] and "[/]" in out


def test_formula_cells_are_quoted_as_text() -> None:
    text = csv_text([{"a": "=HYPERLINK(\"http://x\",\"y\")", "b": "+1", "c": "-cmd", "d": "@SUM(A1)", "e": "\tx",
                      "f": "\r=1", "n": -5, "ok": "a=b", "none": None, "flag": True, "nested": {"k": ["=x"]}}])
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert rows[0] == ["a", "b", "c", "d", "e", "f", "n", "ok", "none", "flag", "nested"]
    assert rows[1] == ["'=HYPERLINK(\"http://x\",\"y\")", "'+1", "'-cmd", "'@SUM(A1)", "'\tx", "␍=1", "-5", "a=b",
                       "", "true", '{"k": ["=x"]}']
    assert_clean(csv_text([{"x": "\x1b]52;c;aGk=\x07\u202e\ud83d"}]))


def test_redact_on_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.store.test_export_html import SECRET, SID, build_dir

    sdir = build_dir(tmp_path / "s")
    import sqlite3

    conn = sqlite3.connect(sdir / "sessions.db")
    conn.execute("UPDATE sessions SET cwd = ? WHERE id = ?", ("/w/" + SECRET, SID))
    conn.commit()
    conn.close()
    code, out, err = run(capsys, "--dir", str(sdir), "list", "--csv", "--redact")
    assert code == 0 and SECRET not in out and "[REDACTED:api-key]" in out
    assert err.startswith("sessionscope: note: redacted ")
    code, out, err = run(capsys, "--dir", str(sdir), "list", "--json", "--redact")
    doc = json.loads(out)
    assert SECRET not in out and doc["redactions"]["api-key"] >= 1 and doc["items"][0]["id"] == SID
    code, out, err = run(capsys, "--dir", str(sdir), "list", "--redact")
    assert code == 0 and "--redact applies to --json and --csv" in err
