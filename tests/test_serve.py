"""``sessionscope serve``: the app in a real headless browser, read-only, on 127.0.0.1 only, behind a token.

The browser test starts ``sessionscope serve --demo --read-only`` as a subprocess (with its own HOME, so the
demo is built from this tree), opens the printed URL in Debian's chromium driven by playwright, and checks
the Sessions screen is drawn. textual-serve's page draws the terminal with xterm.js's WebGL renderer (canvas
as the fallback): the DOM holds no text. So the test reads what the app drew from the websocket: the
binary frames carry the app's terminal output, in which (escape sequences removed) the demo's newest
session title and the READ-ONLY badge must appear; and it saves a screenshot of the page beside the test's
temporary files (``serve.png``).

Skipped, saying why, where /usr/bin/chromium or the playwright package is missing.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser import browser, require_browser
from tui.cli.serve import app_command

ROOT = Path(__file__).resolve().parent.parent
ESCAPES = re.compile(r"\x1b(?:\[[0-9;?$]*[A-Za-z]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[=>])")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MOTHX", "XDG_"))}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT), COLUMNS="120")
    return env


def _cli(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tui.cli", *argv], cwd=ROOT, env=_env(home), capture_output=True,
                          text=True, timeout=300, check=False)


class Served:
    def __init__(self, proc: subprocess.Popen[str], url: str, port: int) -> None:
        self.proc, self.url, self.port = proc, url, port


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    home = tmp_path / "home"
    home.mkdir()
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "serve", "--demo", "--read-only", "--port", str(port)],
                            cwd=ROOT, env=_env(home), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    assert proc.stdout is not None
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
    url, seen, deadline = "", [], time.monotonic() + 240  # the first run builds the demo
    while not url and time.monotonic() < deadline and proc.poll() is None:
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            continue
        seen.append(line)
        found = re.search(r"http://127\.0\.0\.1:\d+/\?token=\S+", line)
        url = found.group(0) if found else ""
    try:
        assert url, f"serve printed no URL: {''.join(seen)!r}"
        for _ in range(100):  # listening once it printed, nearly: wait for the port
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield Served(proc, url, port)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)  # the server and the app processes of its tabs
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=20)


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_sessions_screen_is_drawn_in_a_headless_browser(served: Served, tmp_path: Path) -> None:
    require_browser()
    listed = _cli(tmp_path / "home", "--demo", "list", "--json", "--limit", "1")
    assert listed.returncode == 0, listed.stderr
    title = json.loads(listed.stdout)[0]["title"]
    assert title
    frames: list[bytes] = []
    with browser() as b:
        page = b.new_page(viewport={"width": 1400, "height": 900})
        page.on("websocket", lambda ws: ws.on("framereceived", lambda p: frames.append(
            p if isinstance(p, bytes) else p.encode())))
        foreign: list[str] = []
        page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith(
            (f"http://127.0.0.1:{served.port}/", f"ws://127.0.0.1:{served.port}/")) else None)
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.goto(served.url, wait_until="domcontentloaded", timeout=60_000)
        drawn = ""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            page.wait_for_timeout(500)
            drawn = ESCAPES.sub("", b"".join(frames).decode("utf-8", "replace"))
            if title in drawn and "READ-ONLY" in drawn:
                break
        page.screenshot(path=str(tmp_path / "serve.png"))
        assert title in drawn, drawn[-2000:]
        assert "READ-ONLY" in drawn and "Sessions" in drawn
        assert "-first-byte" in page.evaluate("document.body.className")  # the page got the app's output
        assert page.locator(".textual-terminal canvas").count() >= 1  # xterm.js drew it on a canvas
        assert not dialogs
        # the only request to another site (textual-serve's web font) is blocked by the page's policy
        assert all(url.startswith("https://fonts.googleapis.com/") for url in foreign), foreign
    assert (tmp_path / "serve.png").stat().st_size > 10_000


def test_only_the_token_holder_on_127_0_0_1(served: Served) -> None:
    base = f"http://127.0.0.1:{served.port}"
    token = served.url.split("token=", 1)[1]
    assert _status(served.url) == 200
    assert _status(base + "/") == 403  # no token
    assert _status(base + "/?token=wrong") == 403
    assert _status(served.url, {"Host": f"evil.example:{served.port}"}) == 403  # DNS rebinding
    assert _status(served.url, {"Host": f"localhost:{served.port}"}) == 403
    assert _status(base + "/static/js/textual.js") == 200  # the page's own files
    cookie = {"Cookie": f"sessionscope_token={token}"}
    # another web site's page cannot open the app's websocket, even with the user's cookie
    ws = {**cookie, "Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
          "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="}
    assert _status(base + "/ws", {**ws, "Origin": "http://evil.example"}) == 403
    assert _status(base + "/ws", ws) == 403  # no Origin
    assert _status(base + "/download/x", cookie) == 404  # past the guard: an unknown download


def test_listens_on_127_0_0_1_only(served: Served) -> None:
    out = subprocess.run(["ss", "-ltnH", f"sport = :{served.port}"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.skip("ss is not available")
    addresses = {line.split()[3] for line in out.stdout.splitlines() if line.strip()}
    assert addresses == {f"127.0.0.1:{served.port}"}


def test_read_only_unless_asked() -> None:
    import argparse

    def ns(**kw: object) -> argparse.Namespace:
        return argparse.Namespace(**{"read_only": False, "snapshot": False, "read_write": False, **kw})

    root = Path("/srv/s")
    assert app_command(root, ns())[-3:] == ["--dir", "/srv/s", "--read-only"]
    assert app_command(root, ns(read_only=True))[-1] == "--read-only"
    assert app_command(root, ns(snapshot=True))[-1] == "--snapshot"
    assert app_command(root, ns(read_write=True))[-2:] == ["--dir", "/srv/s"]
    assert app_command(None, ns())[-2:] == ["tui.cli", "--read-only"]


@pytest.mark.parametrize("argv", [["--read-write", "--snapshot"], ["--read-only", "--read-write"],
                                  ["--port", "0"], ["--port", "x"], ["--host", "0.0.0.0"]])
def test_bad_arguments(tmp_path: Path, argv: list[str]) -> None:
    done = _cli(tmp_path, "serve", "--dir", str(tmp_path), *argv)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("sessionscope: ")
