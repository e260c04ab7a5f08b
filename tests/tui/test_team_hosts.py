"""The team store's "Done when", automated: two processes playing two hosts capture Claude Code and Codex trees
into one real PostgreSQL store at the same time; on a third "machine" (an empty session directory, read-only)
the app's captured-session lists and its Checkpoints list show every session of both, each with its host, and
every checkpoint verifies. And hostile host names (``SESSIONSCOPE_HOST``) stay data in the CLI and the app."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from store.agents import capture as cap
from store.agents.checkpoint_engine import use_store
from store.agents.checkpoint_read import list_checkpoints
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.hostile import RAW_FORBIDDEN
from tests.pg import pg_cluster, pg_url  # noqa: F401 - fixtures
from tests.tui.appwait import settle
from tui.app import SessionscopeApp
from tui.cli import core as cli
from tui.screens.checkpoints import CheckpointsScreen
from tui.screens.sessions import SessionsScreen
from tui.widgets.checkpoint_list import CheckpointList
from tui.widgets.native_session_list import AgentSessionList

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
SIZE = (200, 60)  # wide and tall enough for every row and the HOST column
DEADLINE_S = 30.0


def claude_tree(root: Path, host: str, count: int) -> list[str]:
    ids = []
    for i in range(count):
        sid = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{host}-claude-{i}"))
        path = root / f"-home-{host}-proj{i % 2}" / f"{sid}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        recs, parent = [], None
        for n in range(6 + i):
            user = n % 2 == 0
            u = str(uuid.uuid5(uuid.NAMESPACE_OID, f"{sid}/{n}"))
            recs.append({"parentUuid": parent, "isSidechain": False, "cwd": f"/home/{host}/proj{i % 2}",
                         "sessionId": sid, "version": "2.0.44", "type": "user" if user else "assistant",
                         "message": {"role": "user" if user else "assistant",
                                     "content": f"{host}: fix bug {i}" if user else [{"type": "text", "text": "ok"}]},
                         "uuid": u, "timestamp": f"2026-11-{10 + i:02d}T{8 + n:02d}:00:00.000Z"})
            parent = u
        path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs))
        ids.append(sid)
    return ids


def codex_tree(root: Path, host: str, count: int) -> list[str]:
    ids = []
    for i in range(count):
        sid = str(uuid.uuid5(uuid.NAMESPACE_DNS, f"{host}-codex-{i}"))
        day = root / "2026" / "11" / f"{10 + i:02d}"
        day.mkdir(parents=True, exist_ok=True)
        stamp = f"2026-11-{10 + i:02d}T09:00:00.000Z"
        recs = [{"timestamp": stamp, "type": "session_meta", "payload": {"id": sid, "timestamp": stamp,
                 "cwd": f"/home/{host}/svc{i}", "originator": "codex_cli_rs", "cli_version": "0.77.0"}}]
        recs += [{"timestamp": stamp, "type": "response_item", "payload": {"type": "message", "role": "user",
                  "content": [{"type": "input_text", "text": f"{host}: run task {i}.{n}"}]}} for n in range(4 + i)]
        (day / f"rollout-2026-11-{10 + i:02d}T09-00-00-{sid}.jsonl").write_text(
            "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs))
        ids.append(sid)
    return ids


CAPTURE = """
import os, sys, time
sys.path.insert(0, {root!r})
from store.agents.capture import capture_claude_code, capture_codex
from store.mothx.sessiondir import open_session_dir
while not os.path.exists({go!r}):
    time.sleep(0.01)
print("start", time.time(), flush=True)
with open_session_dir({sessions!r}, create=True) as sd:
    a = capture_claude_code(sd, {claude!r})
    b = capture_codex(sd, {codex!r})
print("end", time.time(), a.counts["new"], b.counts["new"], flush=True)
"""


def start_host(tmp: Path, host: str, url: str, go: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, SESSIONSCOPE_HOST=host, SESSIONSCOPE_STORE=url, HOME=str(tmp / f"home-{host}"))
    code = CAPTURE.format(root=str(ROOT), go=str(go), sessions=str(tmp / f"sessions-{host}"),
                          claude=str(tmp / host / "claude"), codex=str(tmp / host / "codex"))
    return subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


async def wait_for(pilot, ready, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)
        await pilot.app.workers.wait_for_complete()


def rendered(widget: AgentSessionList | CheckpointList) -> list[str]:
    return [widget.render_line(y).text for y in range(widget.size.height)]


async def test_two_hosts_capture_at_once_and_a_third_sees_every_session(tmp_path: Path, pg_url: str) -> None:  # noqa: F811
    expected: dict[str, dict[str, str]] = {"claude-code": {}, "codex": {}}  # agent -> id -> host
    for host, (nc, nx) in {"alpha": (7, 4), "beta": (6, 5)}.items():
        expected["claude-code"].update(dict.fromkeys(claude_tree(tmp_path / host / "claude", host, nc), host))
        expected["codex"].update(dict.fromkeys(codex_tree(tmp_path / host / "codex", host, nx), host))
    go = tmp_path / "go"
    procs = {host: start_host(tmp_path, host, pg_url, go) for host in ("alpha", "beta")}
    time.sleep(0.5)
    go.touch()  # both start together
    spans = {}
    for host, proc in procs.items():
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-3000:]
        words = dict((line.split()[0], line.split()[1:]) for line in out.splitlines())
        spans[host] = (float(words["start"][0]), float(words["end"][0]))
        assert words["end"][1:] == [str(sum(1 for h in expected["claude-code"].values() if h == host)),
                                    str(sum(1 for h in expected["codex"].values() if h == host))]
    assert max(s for s, _ in spans.values()) < min(e for _, e in spans.values()), f"the captures overlap: {spans}"

    third = tmp_path / "third"
    open_session_dir(third, OpenMode.READ_WRITE, create=True).close()  # a machine that captured nothing
    use_store(pg_url)
    try:
        with open_session_dir(third, OpenMode.READ_ONLY) as sd:
            listed = {(c.agent_id, c.agent_session_id): c.host for c in list_checkpoints(sd)}
            assert listed == {(a, s): h for a, rows in expected.items() for s, h in rows.items()}
            for agent, sid in listed:
                assert cap.verify(sd, agent, sid).status == "verified", (agent, sid)

        app = SessionscopeApp(third, OpenMode.READ_ONLY)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)

            def agent_list_of(agent: str):
                def ready() -> bool:
                    screen = app.screen
                    return (isinstance(screen, SessionsScreen) and screen.source == agent
                            and bool(screen.query(AgentSessionList)) and screen.query_one(AgentSessionList).loaded
                            and len(screen.query_one(AgentSessionList).rows) == len(expected[agent]))
                return ready

            # no mothx session here: the app opens on the captured Claude Code sessions, `a` goes on to Codex
            await wait_for(pilot, agent_list_of("claude-code"), "the captured Claude Code sessions")
            for agent in ("claude-code", "codex"):
                if agent == "codex":
                    await pilot.press("a")
                    await wait_for(pilot, agent_list_of("codex"), "the captured Codex sessions")
                al = app.screen.query_one(AgentSessionList)
                assert {r.agent_session_id: r.host for r in al.rows} == expected[agent]
                lines = rendered(al)
                assert "HOST" in lines[0]
                for row in al.rows:  # every row is on screen with its host
                    assert any(row.agent_session_id[:8] in line and line.rstrip().endswith(row.host)
                               for line in lines), row.agent_session_id

            app.show_section_screen(CheckpointsScreen)
            await wait_for(pilot, lambda: isinstance(app.screen, CheckpointsScreen)
                           and bool(app.screen.query(CheckpointList)) and app.screen.query_one(CheckpointList).loaded, "the checkpoints")
            cl = app.screen.query_one(CheckpointList)
            assert {(r.agent_id, r.agent_session_id): r.host for r in cl.rows} == listed
            lines = rendered(cl)
            assert "HOST" in lines[0]
            assert sum(1 for line in lines if line.rstrip().endswith(("alpha", "beta"))) == len(listed)
    finally:
        use_store(None)


HOSTILE = ["\x1b]52;c;aGFja2Vk\x07", "\x1b]0;pwned\x07", "\x1b]8;;file:///etc/passwd\x1b\\link\x1b]8;;\x1b\\",
           "\x1b[2J", "\x9b31m", "\x07", "\u202etxt.exe", "pid-4242-[/]", "[bold]x[/bold]",
           "[link=file:///etc/passwd]x[/link]", "[@click=app.quit]x[/]", "/home/u/[archive]/repo"]


@pytest.fixture
def hostile_hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    """A session directory with one Claude Code session captured by each hostile host name."""
    root = tmp_path / "sessions"
    hosts: dict[str, str] = {}
    with open_session_dir(root, OpenMode.READ_WRITE, create=True) as sd:
        for i, host in enumerate(HOSTILE):
            tree = tmp_path / f"tree-{i}"
            (sid,) = claude_tree(tree, f"h{i}", 1)
            monkeypatch.setenv("SESSIONSCOPE_HOST", host)
            cap.capture_claude_code(sd, tree)
            hosts[sid] = host
    monkeypatch.delenv("SESSIONSCOPE_HOST")
    return root, hosts


def test_hostile_hosts_in_the_checkpoints_command(hostile_hosts: tuple[Path, dict[str, str]],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    root, hosts = hostile_hosts
    for args in ([], ["--json"], ["--csv"], ["--host", HOSTILE[0]], ["--host", "[bold]x[/bold]"]):
        code = cli.main(["--dir", str(root), "checkpoints", *args])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert not RAW_FORBIDDEN.search(out + err), (args, out)
        if args == ["--json"]:
            assert {r["agent_session_id"]: r["host"] for r in json.loads(out)} == hosts  # JSON keeps the value
        if args == ["--host", "[bold]x[/bold]"]:
            assert "[bold]x[/bold]" in out and len([ln for ln in out.splitlines() if "claude-code" in ln]) == 1
    cli.main(["--dir", str(root), "checkpoints"])
    table = capsys.readouterr().out
    assert "HOST" in table and "pid-4242-[/]" in table and "[link=file:///etc/passwd]x[/link]" in table


async def test_hostile_hosts_in_the_app_lists(hostile_hosts: tuple[Path, dict[str, str]]) -> None:
    root, hosts = hostile_hosts
    app = SessionscopeApp(root, OpenMode.READ_ONLY)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen) and bool(app.screen.query(AgentSessionList))
                       and len(app.screen.query_one(AgentSessionList).rows) == len(hosts), "the captured sessions")
        al = app.screen.query_one(AgentSessionList)
        assert {r.agent_session_id: r.host for r in al.rows} == hosts
        app.show_section_screen(CheckpointsScreen)
        await wait_for(pilot, lambda: isinstance(app.screen, CheckpointsScreen)
                       and bool(app.screen.query(CheckpointList)) and app.screen.query_one(CheckpointList).loaded, "the checkpoints")
        cl = app.screen.query_one(CheckpointList)
        assert {r.agent_session_id: r.host for r in cl.rows} == hosts
        for widget in (al, cl):
            lines = rendered(widget)
            assert not any(RAW_FORBIDDEN.search(line) for line in lines)
        shown = "\n".join(rendered(cl))
        assert "pid-4242-[/]" in shown and "[bold]x[/bold]" in shown and "␛" in shown
        assert app.is_running  # "[@click=app.quit]" ran nothing
