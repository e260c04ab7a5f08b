"""``sessionscope deliveries`` and ``repair retry-delivery``: output, JSON shape, exit codes, hostile strings."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from store.mothx.db import OpenMode
from store.mothx.delivery_store import NewIntent, NewOperation, claim, create_plan, update_result
from store.mothx.sessiondir import open_session_dir
from store.mothx.simulator import create_session
from store.times import format_rfc3339
from tui.cli import main

HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\",
           "\x1b[2J", "\x9b31m", "\x07", "\u202etxt.exe", "\ud83d", "pid-4242-[/]", "[bold]x[/bold]",
           "[link=file:///etc/passwd]x[/link]", "[@click=app.quit]x[/]", "/home/u/[archive]/repo"]
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
W = "delivery-worker-0000000000000000"
SECRET = '{"appSecret":"SECRET-CONTEXT"}'


def _clean(text: str) -> None:
    assert not RAW.search(text), repr(RAW.search(text))
    assert "SECRET" not in text


@pytest.fixture(autouse=True)
def _private_bus_port(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOTHX_RUNTIME_BUS_PORT", "1")  # nobody listens; announcements are best effort


def _op(root: Path, n: int, platform: str, target: str, kind: str, result: str, code: str,
        chain: bool = False) -> list[str]:
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        sid = create_session(sd)
        ts = format_rfc3339()
        with sd.db.write() as conn:
            conn.execute("INSERT INTO session_runs (id, session_id, status, started_at, updated_at, finished_at) "
                         "VALUES (?, ?, 'completed', ?, ?, ?)", (f"run-{n}", sid, ts, ts, ts))
        kinds = (kind, "send_file") if chain else (kind,)
        ops = [NewOperation(f"k{m}", k, m + 1, depends_on_key="k0" if m else "", id=f"op-{n}-{m + 1}")
               for m, k in enumerate(kinds)]
        create_plan(sd, NewIntent(sid, f"run-{n}", platform, target, transport_context=SECRET,
                                  id=f"intent-{n}"), ops)
        op = claim(sd, ops[0].id, W)
        update_result(sd, ops[0].id, W, op.lease_epoch, result, failure_code=code, provider_state=SECRET)
        return [o.id for o in ops]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


def test_deliveries_lists_failed_and_uncertain_with_retryable(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    up, send = _op(root, 1, "feishu", "oc_1", "upload_file", "failed", "delivery_retries_exhausted", chain=True)
    (unk,) = _op(root, 2, "wechat", "wx_1", "send_text", "uncertain", "transport_error")
    (ok,) = _op(root, 3, "wechat", "wx_2", "send_text", "delivered", "")
    assert main(["--dir", str(root), "deliveries", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["count"] == 3
    got = {d["operationId"]: d for d in data["deliveries"]}
    assert set(got) == {up, send, unk} and ok not in got
    assert got[up]["retryable"] and not got[send]["retryable"]
    assert not got[unk]["retryable"]  # uncertain with transport_error: not retryable (the rule reopen enforces)
    assert set(got[up]) == {"operationId", "intentId", "sessionId", "runId", "platform", "targetId",
                            "operationKind", "status", "failureCode", "attemptCount", "updatedAt", "retryable"}
    assert main(["--dir", str(root), "deliveries"]) == 0
    text = capsys.readouterr().out
    assert "OPERATION" in text and up in text and "transient" in text and "dependency" in text
    sid = got[unk]["sessionId"]
    assert main(["--dir", str(root), "deliveries", "--json", "--session", sid]) == 0
    assert [d["operationId"] for d in json.loads(capsys.readouterr().out)["deliveries"]] == [unk]


def test_hostile_platform_and_target_are_shown_safely(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for n, value in enumerate(HOSTILE):
        _op(root, n, value, value, value if n % 2 else "send_text", "failed", value if n % 3 else "transport_error")
    assert main(["--dir", str(root), "deliveries"]) == 0
    cap = capsys.readouterr()
    _clean(cap.out + cap.err)
    assert "[bold]x[/bold]" in cap.out and "pid-4242-[/]" in cap.out and "␛" in cap.out
    assert main(["--dir", str(root), "deliveries", "--json"]) == 0
    cap = capsys.readouterr()
    _clean(cap.out + cap.err)
    data = json.loads(cap.out)
    assert {d["platform"] for d in data["deliveries"]} == set(HOSTILE)  # lossless through the JSON escapes
    for d in data["deliveries"]:
        assert main(["--dir", str(root), "repair", "retry-delivery", d["operationId"], "--dry-run"]) in (0, 3)
        cap = capsys.readouterr()
        _clean(cap.out + cap.err)


def test_retry_delivery_previews_applies_and_refuses(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    up, send = _op(root, 1, "feishu", "oc_1", "upload_file", "failed", "transport_error", chain=True)
    (unk,) = _op(root, 2, "wechat", "wx_1", "send_text", "uncertain", "provider_outcome_unknown")
    (perm,) = _op(root, 3, "wechat", "wx_2", "send_text", "failed", "provider_rejected")
    db = root / "sessions.db"
    before = db.read_bytes()
    assert main(["--dir", str(root), "repair", "retry-delivery", up, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "retry_wait" in out and send in out and "Dry run" in out
    assert db.read_bytes() == before
    assert main(["--dir", str(root), "repair", "retry-delivery", up]) == 3  # stdin is not a terminal
    assert "pass --yes" in capsys.readouterr().err
    assert main(["--dir", str(root), "repair", "retry-delivery", unk, "--yes"]) == 3
    assert "never re-sent blindly" in capsys.readouterr().err
    assert main(["--dir", str(root), "repair", "retry-delivery", perm, "--yes", "--json"]) == 3
    cap = capsys.readouterr()
    assert json.loads(cap.out)["preview"]["allowed"] is False and "permanently" in cap.err
    assert main(["--dir", str(root), "repair", "retry-delivery", "no-such-op", "--yes"]) == 2
    capsys.readouterr()
    assert main(["--dir", str(root), "--read-only", "repair", "retry-delivery", up, "--yes"]) == 3
    assert "read-only" in capsys.readouterr().err
    assert main(["--dir", str(root), "repair", "retry-delivery", up, "--yes", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["applied"] and "reopened" in result["result"]["message"]
    conn = sqlite3.connect(db)
    try:
        rows = dict(conn.execute("SELECT id, status FROM delivery_operations WHERE id IN (?, ?)", (up, send)))
    finally:
        conn.close()
    assert rows == {up: "retry_wait", send: "retry_wait"}
    assert main(["--dir", str(root), "repair", "retry-delivery", up, "--yes"]) == 3  # not failed any more
    assert "not failed" in capsys.readouterr().err


def test_simulate_deliveries_delivers_a_retried_operation(root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    up, send = _op(root, 1, "feishu", "oc_1", "upload_file", "failed", "transport_error", chain=True)
    assert main(["--dir", str(root), "repair", "retry-delivery", up, "--yes"]) == 0
    capsys.readouterr()
    assert main(["--dir", str(root), "simulate-deliveries", "--exit-when-idle", "--call-seconds", "0"]) == 0
    events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["status"] for e in events if e["event"] == "result"] == ["uploaded", "delivered"]
    assert main(["--dir", str(root), "deliveries", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 0
    assert main(["--dir", str(root), "--read-only", "simulate-deliveries", "--exit-when-idle"]) == 3
    assert main(["--dir", str(root), "simulate-deliveries", "--script", "bad"]) == 2
