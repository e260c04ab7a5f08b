"""Hosts in the row sources, and the captured-session list on PostgreSQL: the same rows, order and pages on
both engines (records that PostgreSQL's own JSON reader refuses included), each row with the host that last
captured it, hostile host names kept as data."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from store.agents import capture as cap
from store.agents.checkpoint_engine import use_store
from store.agents.checkpoint_read import checkpoint_page, list_checkpoints
from store.agents.native_catalog import agent_session_page, list_agent_sessions
from store.mothx.sessiondir import SessionDir, open_session_dir
from tests.pg import pg_cluster, pg_url, store_url  # noqa: F401 - fixtures

AGENT = "claude-code"


@pytest.fixture
def sd(tmp_path: Path, store_url: str | None) -> Iterator[SessionDir]:  # noqa: F811 - the fixture of tests.pg
    use_store(store_url)
    d = open_session_dir(tmp_path / "sessions", create=True)
    yield d
    d.close()
    use_store(None)


def rec(sid: str, n: int, **extra: object) -> dict[str, object]:
    out: dict[str, object] = {"parentUuid": None, "type": "user", "sessionId": sid, "uuid": f"{sid}-{n}",
                              "message": {"role": "user", "content": f"prompt {n} of {sid[:8]}"}}
    out.update(extra)
    return out


def ts(minute: int) -> str:
    return f"2026-11-20T12:{minute:02d}:00Z"


def tricky_tree(root: Path) -> list[str]:
    """Sessions whose last records test the last-timestamp rule: nested keys, escapes PostgreSQL refuses, no
    timestamp at all, a timestamp that is not text, an escaped one, a blank one, a huge record."""
    def raw(sid: str, minute: int, last: str) -> bytes:
        first = json.dumps(rec(sid, 0, timestamp=ts(minute)), separators=(",", ":"))
        return (first + "\n" + last + "\n").encode()

    cases: dict[str, bytes] = {}
    def sid(i: int) -> str:
        return str(uuid.UUID(int=0xC0FFEE << 64 | i))
    s = sid(1)  # a nested "timestamp" before the record's own
    cases[s] = raw(s, 1, '{"type":"user","message":{"role":"user","content":"a","timestamp":"2099-01-01T00:00:00Z"},'
                         f'"sessionId":"{s}","timestamp":"{ts(41)}"}}')
    s = sid(2)  # the key inside a string, \u0000 and a lone surrogate escape elsewhere in the record
    cases[s] = raw(s, 2, '{"type":"user","message":{"role":"user","content":"x\\"timestamp\\":\\"2099\\" \\u0000 '
                         f'\\ud83d"}},"timestamp":"{ts(42)}","sessionId":"{s}"}}')
    s = sid(3)  # no timestamp in the last record: the one before it
    cases[s] = raw(s, 3, f'{{"type":"summary","summary":"s","leafUuid":"{s}"}}')
    s = sid(4)  # a timestamp that is a number: not one
    cases[s] = raw(s, 44, '{"type":"user","timestamp":17}')
    s = sid(5)  # an escaped timestamp is read decoded
    cases[s] = raw(s, 5, '{"type":"user","timestamp":"2026-11-20T12:45:00\\u005a"}')
    s = sid(6)  # a blank timestamp is none
    cases[s] = raw(s, 46, '{"type":"user","timestamp":"   "}')
    s = sid(7)  # a timestamp holding a lone surrogate escape (PostgreSQL cannot decode it)
    cases[s] = raw(s, 47, '{"type":"user","timestamp":"2026-11-20T12:59:00Z\\ud83d"}')
    s = sid(8)  # a large record last
    cases[s] = raw(s, 8, json.dumps(rec(s, 1, timestamp=ts(48), toolUseResult={"stdout": "{[" * 20000}),
                                    separators=(",", ":")))
    s = sid(9)  # a top-level key after a nested object holding braces in strings
    cases[s] = raw(s, 9, f'{{"message":{{"content":[{{"text":"}}}}]{{"}}]}},"timestamp":"{ts(49)}"}}')
    for s, body in cases.items():
        path = root / "-home-u-proj" / f"{s}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    return sorted(cases)


def shown(sd: SessionDir) -> list[tuple[str, str, str, int]]:
    return [(r.agent_session_id, r.last_record_at, r.title, r.records) for r in list_agent_sessions(sd, AGENT)]


def test_captured_list_is_the_same_on_both_engines(tmp_path: Path, pg_url: str,  # noqa: F811
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    tricky_tree(tmp_path / "projects")
    lists = []
    for url in (None, pg_url):
        use_store(url)
        try:
            monkeypatch.setenv("SESSIONSCOPE_HOST", "pg-host" if url else "file-host")
            with open_session_dir(tmp_path / ("pg" if url else "file"), create=True) as sd:
                assert cap.capture_claude_code(sd, tmp_path / "projects").counts["new"] == 9
                lists.append(shown(sd))
                assert {r.host for r in list_agent_sessions(sd, AGENT)} == {"pg-host" if url else "file-host"}
        finally:
            use_store(None)
    assert lists[0] == lists[1]
    times = {sid[-1]: last for sid, last, _, _ in lists[0]}
    assert times["1"] == ts(41)  # the record's own timestamp, not the nested one
    assert times["2"] == ts(42)
    assert times["3"] == ts(3)  # the record before the last one
    assert times["5"] == ts(45)  # decoded
    assert times["9"] == ts(49)


def test_captured_pages_both_ways_on_both_engines(sd: SessionDir, tmp_path: Path) -> None:
    tricky_tree(tmp_path / "projects")
    cap.capture_claude_code(sd, tmp_path / "projects")
    every = [r.agent_session_id for r in list_agent_sessions(sd, AGENT)]
    assert len(every) == 9
    got: list[str] = []
    page = agent_session_page(sd, AGENT, limit=2)
    got.extend(r.agent_session_id for r in page.rows)
    while page.more:
        page = agent_session_page(sd, AGENT, after=page.last_key, limit=2)
        got.extend(r.agent_session_id for r in page.rows)
    assert got == every
    last = agent_session_page(sd, AGENT, last=True, limit=3)
    assert [r.agent_session_id for r in last.rows] == every[-3:] and last.more
    back = agent_session_page(sd, AGENT, before=last.first_key, limit=3)
    assert [r.agent_session_id for r in back.rows] == every[-6:-3]
    hit = agent_session_page(sd, AGENT, needle="LEAFUUID")  # the filter on content
    assert [r.agent_session_id[-1] for r in hit.rows] == ["3"]
    with pytest.raises(ValueError):
        agent_session_page(sd, AGENT, after=last.first_key, last=True)


HOSTILE_HOSTS = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b[2J", "\x9b31m", "\u202etxt.exe",
                 "pid-4242-[/]", "[bold]x[/bold]", "[link=file:///etc/passwd]x[/link]", "[@click=app.quit]x[/]"]


def test_hosts_in_the_checkpoint_pages_and_the_filter(sd: SessionDir, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    ids = tricky_tree(tmp_path / "projects")
    cap.capture_claude_code(sd, tmp_path / "projects")
    monkeypatch.setenv("SESSIONSCOPE_HOST", HOSTILE_HOSTS[0])
    sid = ids[2]
    path = next((tmp_path / "projects").rglob(f"{sid}.jsonl"))
    with path.open("a") as fh:
        fh.write(json.dumps(rec(sid, 9, timestamp=ts(50)), separators=(",", ":")) + "\n")
    cap.capture_claude_code(sd, tmp_path / "projects")
    hosts = {c.agent_session_id: c.host for c in list_checkpoints(sd)}
    assert hosts[sid] == HOSTILE_HOSTS[0]  # the host that captured it last, as stored
    assert len(set(hosts.values())) == 2
    first = checkpoint_page(sd, limit=4)
    assert [r.host for r in first.rows] == [hosts[r.agent_session_id] for r in first.rows]
    assert [r.agent_session_id for r in list_checkpoints(sd, host=HOSTILE_HOSTS[0])] == [sid]
    assert checkpoint_page(sd, host="nobody").rows == ()
    end = checkpoint_page(sd, last=True, limit=4)
    assert [r.agent_session_id for r in end.rows] == sorted(hosts)[-4:] and end.more
    assert {r.agent_session_id: r.host for r in list_agent_sessions(sd, AGENT)} == hosts


def test_a_host_name_that_is_not_utf8_is_stored_readably(monkeypatch: pytest.MonkeyPatch) -> None:
    from store.agents.checkpoint_write import HOST_ENV, this_host

    monkeypatch.setenv(HOST_ENV, "bad\udcff-host")   # what os.environ gives for the bytes b"bad\xff-host"
    assert this_host() == "bad\ufffd-host"
    this_host().encode("utf-8")                       # any engine can store it
    monkeypatch.setenv(HOST_ENV, "  ")
    assert this_host() == this_host().strip() != ""   # blank: the machine's host name
