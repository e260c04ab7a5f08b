"""Usage figures (store/usage.py) against a hand-built directory: request_stats rows and captured Claude Code and
Codex transcripts, every view's exact numbers, cost from a price table, hostile and damaged cells, read modes."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from store import usage as u
from store.agents import capture as cap
from store.mothx.cells import bind
from store.mothx.db import OpenMode
from store.mothx.sessiondir import SessionDir, open_session_dir

HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b[2J", "\x9b31m", "\u202etxt.exe", "\ud83d",
           "pid-4242-[/]", "[bold]x[/bold]", "[@click=app.quit]x[/]", "/home/u/[archive]/repo"]

STATS = [
    # timestamp, session, provider, model, input, output, total
    ("2026-11-01T10:00:00Z", "s1", "anthropic", "claude-a", 100, 10, 110),
    ("2026-11-01T23:30:00-02:00", "s1", "anthropic", "claude-a", 200, 20, 0),   # UTC 11-02; total 0 → in + out
    ("2026-11-02T09:00:00Z", "s2", "openai", "gpt-b", 1000, 100, 1100),
    ("2026-11-03T09:00:00Z", "s3", "openai", "gpt-b", 50, 5, 55),               # s3 was deleted
    ("2026-11-03T10:00:00Z", "s2", "anthropic", "claude-a", "abc", 7, 7),       # a damaged input cell
]


def add_stats(sd: SessionDir, rows: Sequence[tuple[object, ...]]) -> None:
    with sd.db.write() as conn:
        conn.executemany("INSERT INTO request_stats (timestamp, session_id, provider, model, input_tokens, "
                         "output_tokens, total_tokens) VALUES (?,?,?,?,?,?,?)",
                         [tuple(bind(v) if isinstance(v, str) else v for v in row) for row in rows])


@pytest.fixture
def sd(tmp_path: Path) -> Iterator[SessionDir]:
    d = open_session_dir(tmp_path / "sessions", create=True)
    with d.db.write() as conn:
        conn.executemany("INSERT INTO sessions (id, cwd, timestamp) VALUES (?,?,?)",
                         [("s1", "/home/u/alpha", "2026-11-01T09:00:00Z"), ("s2", "/home/u/beta", "2026-11-01T09:00:00Z")])
    add_stats(d, STATS)
    yield d
    d.close()


def figures(report: u.UsageReport) -> dict[str, tuple[int, int, int, int]]:
    return {r.key: (r.requests, r.input_tokens, r.output_tokens, r.total_tokens) for r in report.rows}


def test_per_day_in_utc(sd: SessionDir) -> None:
    report = u.usage(sd, "day", source="mothx")
    assert figures(report) == {"2026-11-01": (1, 100, 10, 110), "2026-11-02": (2, 1200, 120, 1320),
                               "2026-11-03": (2, 50, 12, 62)}
    assert [r.key for r in report.rows] == ["2026-11-01", "2026-11-02", "2026-11-03"]
    t = report.totals
    assert (t.requests, t.input_tokens, t.output_tokens, t.total_tokens, t.damaged) == (5, 1350, 142, 1492, 1)
    assert t.cache_read_tokens == t.cache_write_tokens == 0 and t.cost is None and not report.priced
    assert report.problems == ("1 damaged token cell counted as 0",)
    assert u.daily_series(report) == [110, 1320, 62]


def test_per_model_session_and_cwd(sd: SessionDir) -> None:
    assert figures(u.usage(sd, "model", source="mothx")) == {"gpt-b": (2, 1050, 105, 1155), "claude-a": (3, 300, 37, 337)}
    sessions = u.usage(sd, "session", source="mothx")
    assert figures(sessions) == {"s2": (2, 1000, 107, 1107), "s1": (2, 300, 30, 330), "s3": (1, 50, 5, 55)}
    assert [r.key for r in sessions.rows] == ["s2", "s1", "s3"]  # largest first
    by_key = {r.key: r for r in sessions.rows}
    assert (by_key["s1"].cwd, by_key["s1"].session_exists) == ("/home/u/alpha", True)
    assert (by_key["s3"].cwd, by_key["s3"].session_exists) == ("", False)  # deleted: its rows stay
    assert figures(u.usage(sd, "cwd", source="mothx")) == {"/home/u/beta": (2, 1000, 107, 1107),
                                                           "/home/u/alpha": (2, 300, 30, 330), "": (1, 50, 5, 55)}


def test_since_and_bad_arguments(sd: SessionDir) -> None:
    assert figures(u.usage(sd, "day", source="mothx", since="2026-11-02")) == {
        "2026-11-02": (2, 1200, 120, 1320), "2026-11-03": (2, 50, 12, 62)}
    assert u.usage(sd, "model", source="mothx", since="2026-12-01").rows == ()
    with pytest.raises(ValueError, match="not a date"):
        u.usage(sd, since="yesterday")
    with pytest.raises(ValueError):
        u.usage(sd, "week")  # type: ignore[arg-type]


def test_cost_from_a_price_table(sd: SessionDir, tmp_path: Path) -> None:
    path = tmp_path / "prices.toml"
    path.write_text('"claude-a" = { input = 3.0, output = 15.0 }\n"gpt-*" = { input = 1, output = 10 }\n')
    prices = u.load_prices(path)
    assert prices.problems == () and prices.configured
    report = u.usage(sd, "model", source="mothx", prices=prices)
    cost = {r.key: r.cost for r in report.rows}
    assert cost["claude-a"] == pytest.approx((300 * 3 + 37 * 15) / 1e6)
    assert cost["gpt-b"] == pytest.approx((1050 * 1 + 105 * 10) / 1e6)
    day = u.usage(sd, "day", source="mothx", prices=prices)
    assert day.totals.cost == pytest.approx(0.003555) and day.priced
    assert {r.key: r.cost for r in day.rows}["2026-11-01"] == pytest.approx(0.00045)
    # a model the table does not name: no cost for it, its tokens counted as unpriced
    only = u.parse_prices({"claude-a": {"input": 3.0, "output": 15.0}})
    by_model = {r.key: r for r in u.usage(sd, "model", source="mothx", prices=only).rows}
    assert by_model["gpt-b"].cost is None and by_model["gpt-b"].unpriced == 1155
    assert by_model["claude-a"].unpriced == 0


def test_price_file_problems_are_named(tmp_path: Path) -> None:
    assert u.load_prices(tmp_path / "absent.toml") == u.PriceTable(path=str(tmp_path / "absent.toml"))
    bad = tmp_path / "prices.toml"
    bad.write_text('"a" = 3\n"b" = { input = "x", output = 1 }\n"c" = { input = 1 }\n'
                   '"d" = { input = 1, output = 2, colour = 3 }\n"e" = { input = -1, output = 2 }\n')
    table = u.load_prices(bad)
    assert [name for name, _ in table.entries] == ["d"]
    assert len(table.problems) == 5 and all("prices.toml" in p for p in table.problems)
    bad.write_text("not = [toml")
    assert u.load_prices(bad).problems[0].endswith(")") and not u.load_prices(bad).configured
    # a [prices] table (the shape it takes once folded into config.toml) reads the same
    bad.write_text('[prices]\n"m" = { input = 2, output = 4, cache_read = 0.5 }\n')
    assert u.load_prices(bad).find("m") == u.Price(2.0, 4.0, None, 0.5)
    glob = u.parse_prices({"claude-*": {"input": 1, "output": 1}, "claude-opus-*": {"input": 5, "output": 5}})
    assert glob.find("claude-opus-4") == u.Price(5.0, 5.0) and glob.find("claude-x") == u.Price(1.0, 1.0)
    assert glob.find("gpt") is None


def test_damaged_and_hostile_cells_never_crash(sd: SessionDir) -> None:
    rows: list[tuple[object, ...]] = [
        ("2026-11-04T00:00:00Z", name, "p", name, 1, 1, 2) for name in HOSTILE]
    rows += [
        ("2026-11-04T00:00:00Z", "s1", "p", "m", 2**62, 2**62, 2**63 - 1),   # absurd: damaged, no overflow
        ("2026-11-04T00:00:00Z", "s1", "p", "m", -5, b"\x00\x01", 1.5),       # negative, a BLOB, a REAL
        ("not a time", "s1", "p", b"\xff\xfe", 3, 4, 7),                     # model as a BLOB, no day
        (12345, None, "p", "m", 1, 1, 2),                                    # a number as time, no session
    ]
    add_stats(sd, rows)
    with sd.db.write() as conn:
        conn.executemany("INSERT INTO sessions (id, cwd) VALUES (?,?)",
                         [(f"h{i}", bind(h)) for i, h in enumerate(HOSTILE)])
        conn.execute("UPDATE request_stats SET session_id = 'h' || (id - 6) WHERE id BETWEEN 6 AND 15")
    for by in u.GROUPS:
        report = u.usage(sd, by, source="mothx")
        assert report.totals.requests == len(STATS) + len(rows)
        json.dumps(report.to_json())  # serialisable (the CLI escapes it)
    day = {r.key: r for r in u.usage(sd, "day", source="mothx").rows}
    assert day[""].requests == 2 and day[""].total_tokens == 9
    assert day["2026-11-04"].damaged == 6 and day["2026-11-04"].total_tokens == 2 * len(HOSTILE)
    models = {r.key for r in u.usage(sd, "model", source="mothx").rows}
    assert set(HOSTILE) <= models and "\udcff\udcfe" in models
    cwds = {r.key for r in u.usage(sd, "cwd", source="mothx").rows}
    assert set(HOSTILE) <= cwds


def test_a_foreign_layout_missing_columns(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "foreign"
    path.mkdir()
    conn = sqlite3.connect(path / "sessions.db")
    conn.executescript("CREATE TABLE sessions (id TEXT PRIMARY KEY);"
                       "CREATE TABLE entries (seq INTEGER PRIMARY KEY, session_id TEXT, type TEXT, data TEXT);"
                       "CREATE TABLE request_stats (id INTEGER PRIMARY KEY, timestamp TEXT, session_id TEXT, "
                       "model TEXT, input_tokens INTEGER, output_tokens INTEGER);"
                       "INSERT INTO sessions VALUES ('s1');"
                       "INSERT INTO request_stats VALUES (1, '2026-11-01T00:00:00Z', 's1', 'm', 5, 6);")
    conn.commit()
    conn.close()
    with open_session_dir(path, OpenMode.READ_ONLY) as d:
        for by in u.GROUPS:
            report = u.usage(d, by, source="mothx")
            assert (report.totals.total_tokens, report.totals.damaged) == (11, 0), by
        assert u.usage(d, "session", source="mothx").rows[0].cwd == ""


def test_a_directory_without_request_stats(tmp_path: Path) -> None:
    with open_session_dir(tmp_path / "empty", create=True) as d:
        with d.db.write() as conn:
            conn.execute("DROP TABLE request_stats")
    with open_session_dir(tmp_path / "empty", OpenMode.READ_ONLY) as d:
        report = u.usage(d, "session")
    assert report.rows == () and report.totals.requests == 0


# --- captured transcripts -------------------------------------------------------------------------------------------

CLAUDE_SID = "0d3c5e2a-1111-4222-8333-444455556666"
CODEX_SID = "019c8a70-dda7-7f33-98ea-f30553347322"


def claude_lines() -> list[dict[str, object]]:
    def rec(n: int, kind: str, ts: str, **extra: object) -> dict[str, object]:
        r: dict[str, object] = {"parentUuid": f"00000000-0000-4000-8000-{n - 1:012d}" if n > 1 else None,
                                "uuid": f"00000000-0000-4000-8000-{n:012d}", "sessionId": CLAUDE_SID,
                                "cwd": "/home/u/claude", "type": kind, "timestamp": ts}
        r.update(extra)
        return r

    def said(mid: str, model: str, usage: Mapping[str, object], text: str = "ok") -> dict[str, object]:
        return {"model": model, "id": mid, "role": "assistant", "content": [{"type": "text", "text": text}],
                "usage": usage}

    usage1 = {"input_tokens": 3, "output_tokens": 12, "cache_creation_input_tokens": 500, "cache_read_input_tokens": 2000}
    usage2 = {"input_tokens": 5, "output_tokens": 40, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 2500}
    return [
        rec(1, "user", "2026-11-01T10:00:00Z", message={"role": "user", "content": "hi"}),
        # one message over two records (thinking, then text): counted once, with the last record's usage
        rec(2, "assistant", "2026-11-01T10:00:01Z", requestId="req_1",
            message=said("msg_1", "claude-a", {**usage1, "output_tokens": 1}, "think")),
        rec(3, "assistant", "2026-11-01T10:00:02Z", requestId="req_1", message=said("msg_1", "claude-a", usage1)),
        rec(4, "user", "2026-11-02T08:00:00Z", message={"role": "user", "content": "more"}),
        rec(5, "assistant", "2026-11-02T08:00:01Z", requestId="req_2", message=said("msg_2", "claude-a", usage2)),
        rec(6, "assistant", "2026-11-02T08:00:02Z",
            message=said("msg_3", "<synthetic>", {"input_tokens": 0, "output_tokens": 0})),
        rec(7, "assistant", "2026-11-02T08:00:03Z", requestId="req_4",
            message=said("msg_4", HOSTILE[0], {"input_tokens": "many", "output_tokens": 1})),
    ]


def codex_lines() -> list[dict[str, object]]:
    def ev(ts: str, kind: str, payload: dict[str, object]) -> dict[str, object]:
        return {"timestamp": ts, "type": kind, "payload": payload}

    def count(total: int, last: dict[str, int]) -> dict[str, object]:
        return {"type": "token_count", "info": {"total_token_usage": {"total_tokens": total}, "last_token_usage": last}}

    first = {"input_tokens": 1000, "cached_input_tokens": 400, "output_tokens": 50, "total_tokens": 1050}
    second = {"input_tokens": 2000, "cached_input_tokens": 1500, "output_tokens": 70, "total_tokens": 2070}
    return [
        ev("2026-11-02T09:00:00Z", "session_meta", {"id": CODEX_SID, "cwd": "/home/u/codex", "model_provider": "openai"}),
        ev("2026-11-02T09:00:01Z", "turn_context", {"cwd": "/home/u/codex", "model": "gpt-b"}),
        ev("2026-11-02T09:00:02Z", "event_msg", {"type": "token_count", "info": None}),
        ev("2026-11-02T09:00:03Z", "event_msg", count(1050, first)),
        ev("2026-11-02T09:00:04Z", "event_msg", count(1050, first)),   # a repeat: counted once
        ev("2026-11-03T09:00:05Z", "event_msg", count(3120, second)),
    ]


def write_jsonl(path: Path, records: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


@pytest.fixture
def captured(sd: SessionDir, tmp_path: Path) -> SessionDir:
    claude = tmp_path / "claude"
    write_jsonl(claude / "-home-u-claude" / f"{CLAUDE_SID}.jsonl", claude_lines())
    codex = tmp_path / "codex"
    write_jsonl(codex / "2026" / "11" / "02" / f"rollout-2026-11-02T09-00-00-{CODEX_SID}.jsonl", codex_lines())
    assert cap.capture_claude_code(sd, claude).counts["new"] == 1
    assert cap.capture_codex(sd, codex).counts["new"] == 1
    return sd


def test_captured_usage_records(captured: SessionDir) -> None:
    got = u.captured_usage(captured)
    assert got.problems == ()
    claude = sorted((r for r in got.records if r.agent == "claude-code"), key=lambda r: r.timestamp)
    assert [(r.model, r.input_tokens, r.output_tokens, r.cache_write_tokens, r.cache_read_tokens, r.damaged)
            for r in claude] == [("claude-a", 3, 12, 500, 2000, 0), ("claude-a", 5, 40, 0, 2500, 0),
                                 (HOSTILE[0], 0, 1, 0, 0, 1)]
    assert claude[0].timestamp == "2026-11-01T10:00:01Z" and claude[0].cwd == "/home/u/claude"
    codex = [r for r in got.records if r.agent == "codex"]
    assert [(r.model, r.cwd, r.input_tokens, r.cache_read_tokens, r.output_tokens) for r in codex] == [
        ("gpt-b", "/home/u/codex", 600, 400, 50), ("gpt-b", "/home/u/codex", 500, 1500, 70)]


def test_captured_views_and_all(captured: SessionDir, tmp_path: Path) -> None:
    day = u.usage(captured, "day", source="captured")
    assert figures(day) == {"2026-11-01": (1, 3, 12, 2515), "2026-11-02": (3, 605, 91, 3596),
                            "2026-11-03": (1, 500, 70, 2070)}
    assert (day.totals.cache_write_tokens, day.totals.cache_read_tokens, day.totals.damaged) == (500, 6400, 1)
    sessions = {r.ident: r for r in u.usage(captured, "session", source="captured").rows}
    assert sessions[("claude-code", CLAUDE_SID)].total_tokens == 2515 + 2545 + 1
    assert sessions[("codex", CODEX_SID)].cwd == "/home/u/codex"
    both = u.usage(captured, "model", source="all")
    gpt = {r.key: r for r in both.rows}["gpt-b"]
    assert (gpt.requests, gpt.total_tokens, gpt.sources) == (4, 1155 + 3120, ("mothx", "captured"))
    assert both.totals.total_tokens == 1492 + 2515 + 3596 + 2070
    assert figures(u.usage(captured, "cwd", source="captured"))["/home/u/claude"][3] == 5061
    prices = u.parse_prices({"claude-a": {"input": 3, "output": 15, "cache_write": 3.75, "cache_read": 0.3}})
    claude = {r.key: r for r in u.usage(captured, "model", source="captured", prices=prices).rows}["claude-a"]
    assert claude.cost == pytest.approx((8 * 3 + 52 * 15 + 500 * 3.75 + 4500 * 0.3) / 1e6)
    since = u.usage(captured, "session", source="captured", since="2026-11-03")
    assert [(r.agent, r.total_tokens) for r in since.rows] == [("codex", 2070)]


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns) for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("mode", [OpenMode.READ_ONLY, OpenMode.SNAPSHOT])
def test_read_modes_write_nothing(captured: SessionDir, mode: OpenMode) -> None:
    root = captured.root
    captured.close()
    before = snapshot(root)
    with open_session_dir(root, mode) as d:
        for by in u.GROUPS:
            report = u.usage(d, by, source="all")
            assert report.totals.requests == 5 + 5
    assert snapshot(root) == before


def test_a_checkpoint_that_does_not_verify_is_named_not_raised(captured: SessionDir) -> None:
    import sqlite3

    from store.agents.checkpoint_db import state_db_path

    conn = sqlite3.connect(state_db_path(captured))
    conn.execute("DELETE FROM agent_state_lines WHERE line_number = 2")
    conn.commit()
    conn.close()
    got = u.captured_usage(captured)
    assert len(got.problems) == 2 and got.records == ()
    report = u.usage(captured, "day", source="all")
    assert report.totals.requests == 5 and len(report.problems) == 3


def test_daily_series_fills_gaps() -> None:
    rows = tuple(u.UsageRow(k, total_tokens=t) for k, t in [("2026-11-01", 5), ("2026-11-04", 7), ("", 9)])
    report = u.UsageReport("day", "all", "", rows, u.UsageRow("total"), False)
    assert u.daily_series(report) == [5, 0, 0, 7]
    assert u.daily_series(report, days=2) == [0, 7]
    assert u.daily_series(u.UsageReport("day", "all", "", (), u.UsageRow("total"), False)) == []


# --- real transcripts ---------------------------------------------------------------------------------------------


def test_real_transcripts(real_fixtures: Path, sd: SessionDir, tmp_path: Path) -> None:
    claude = tmp_path / "real-claude"
    shutil.copytree(real_fixtures / "claude-code", claude)
    codex = tmp_path / "real-codex"
    shutil.copytree(real_fixtures / "codex" / "sessions", codex)
    cap.capture_claude_code(sd, claude)
    cap.capture_codex(sd, codex)
    got = u.captured_usage(sd)
    assert got.problems == ()
    # Claude Code: one record per (message id, request id) of the assistant records with usage, in every file
    expected: set[tuple[str, str, str]] = set()
    for path in claude.rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            msg = obj.get("message") if isinstance(obj, dict) else None
            if (obj.get("type") == "assistant" and isinstance(msg, dict) and isinstance(msg.get("usage"), dict)
                    and msg.get("model") != "<synthetic>" and msg.get("id")):
                expected.add((str(obj.get("sessionId")), msg["id"], str(obj.get("requestId", ""))))
    mine = [r for r in got.records if r.agent == "claude-code"]
    assert 0 < len(mine) <= len(expected)
    assert all(r.timestamp.endswith("Z") and r.model for r in mine)
    codex_records = [r for r in got.records if r.agent == "codex"]
    assert codex_records and all(r.model.startswith("gpt") for r in codex_records)
    # Codex: the per-response counts add up to each rollout's last running total
    sessions = {r.key: r.total_tokens for r in u.usage(sd, "session", source="captured").rows if r.agent == "codex"}
    for path in codex.rglob("rollout-*.jsonl"):
        counts = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if '"token_count"' in line]
        last = [c for c in counts if c["payload"].get("info")][-1]["payload"]["info"]["total_token_usage"]
        assert sessions[path.stem[-36:]] == last["total_tokens"]
    report = u.usage(sd, "model", source="captured")
    assert report.totals.total_tokens == sum(
        r.input_tokens + r.output_tokens + r.cache_write_tokens + r.cache_read_tokens for r in got.records)
    assert report.totals.damaged == 0
