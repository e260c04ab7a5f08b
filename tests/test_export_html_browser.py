"""The HTML export opened in a real headless browser (chromium through playwright): hostile transcripts run no
script, open no dialog, fetch nothing, and show their text literally; tool calls and thinking fold open."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from store.agents.native import read_claude_code_file
from store.export_html import mothx_html, native_html
from store.mothx.db import OpenMode
from store.mothx.sessiondir import open_session_dir
from tests.browser import browser
from tests.store.test_export_html import SID, WEB, _claude_file, build_dir

PROBE = "window.__pwned === undefined && document.scripts.length === 0 && document.images.length === 0 " \
        "&& document.links.length === 0 && document.querySelectorAll('iframe, svg, object, embed').length === 0"


def _open(b: Any, page_file: Path) -> tuple[Any, list[str], list[str], list[str]]:
    page = b.new_page()
    dialogs: list[str] = []
    requests: list[str] = []
    errors: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url))
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(page_file.as_uri(), wait_until="load")
    page.wait_for_timeout(300)
    return page, dialogs, requests, errors


def test_hostile_pages_in_chromium(tmp_path: Path) -> None:
    sdir = build_dir(tmp_path / "s")
    with open_session_dir(sdir, OpenMode.READ_ONLY) as sd:
        mothx = mothx_html(sd, SID)
    files = {"mothx": tmp_path / "mothx.html", "claude": tmp_path / "claude.html"}
    files["mothx"].write_text(mothx, encoding="utf-8")
    files["claude"].write_text(native_html(read_claude_code_file(_claude_file(tmp_path / "p"))), encoding="utf-8")
    with browser() as b:
        for name, path in files.items():
            page, dialogs, requests, errors = _open(b, path)
            assert not dialogs and not errors, (name, dialogs, errors)
            assert requests == [path.as_uri()], (name, requests)  # the page itself, nothing else
            assert page.evaluate(PROBE), name
            body = page.inner_text("body")
            for payload in WEB:
                assert payload in body or payload.replace("\n", " ") in body, (name, payload)
            details = page.locator("details")
            assert details.count() >= 3
            first = details.first
            assert first.evaluate("d => d.open") is False
            first.locator("summary").click()
            assert first.evaluate("d => d.open") is True
            page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
            if os.environ.get("SESSIONSCOPE_SHOTS"):
                page.screenshot(path=os.path.join(os.environ["SESSIONSCOPE_SHOTS"], f"export-{name}.png"), full_page=True)
            page.close()
