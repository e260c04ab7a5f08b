"""A real headless browser for the tests that need one: Debian's chromium, driven by playwright.

No browser is downloaded (never ``playwright install``): the tests use ``/usr/bin/chromium`` (``apt-get install
chromium``) and the ``playwright`` package of the ``test`` extra, and are skipped, saying which is missing,
when either is absent.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CHROMIUM = os.environ.get("SESSIONSCOPE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]


def require_browser() -> None:
    """Skip the test unless chromium and playwright are both there."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("the playwright package is missing (pip install -e '.[test]')")


@contextmanager
def browser() -> Iterator[Any]:
    """A launched chromium (a playwright ``Browser``), closed afterwards."""
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield b
        finally:
            b.close()
