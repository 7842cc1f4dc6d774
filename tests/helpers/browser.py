"""Headless Chromium (Debian's package) driven by Playwright's Python package, for the browser page's tests.

``require_browser()`` skips when Chromium is missing, and fails instead when
``RAGTUI_REQUIRE_BROWSER`` is set (.ci/run sets it, so the test cannot
silently stop running in CI). The ``playwright`` package is part of the test
extra: without it the test fails (a broken install is not a reason to skip). The variable is read when
this module is imported: tests/conftest.py removes every ``RAGTUI_*`` variable
before each test runs.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib.util
import os
import shutil
import threading
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
_REQUIRED = bool(os.environ.get("RAGTUI_REQUIRE_BROWSER"))


def missing() -> str | None:
    """Why the browser tests cannot run (Chromium is not installed), or None."""
    if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
        return f"{CHROMIUM} is not installed (apt-get install chromium)"
    return None


def require_browser() -> None:
    reason = missing()
    if reason is not None:
        if _REQUIRED:
            pytest.fail(f"RAGTUI_REQUIRE_BROWSER is set but {reason}")
        pytest.skip(reason)
    if importlib.util.find_spec("playwright") is None:
        pytest.fail("the playwright package is not installed (it is in the test extra: pip install -e '.[test]')")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


@contextlib.contextmanager
def serve(folder: Path):
    """A loopback http.server for ``folder``; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def chromium():
    """A launched headless Chromium (Playwright ``Browser``)."""
    from playwright.sync_api import sync_playwright

    path = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=path, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def css_string(text: str) -> str:
    """``text`` as a quoted CSS string (for attribute selectors: the page's CSP forbids eval)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\a ") + '"'


def search(page, query: str, timeout: float = 30_000) -> list[dict]:
    """Type ``query`` into the page's box and return the hits it shows (chunk, id, score, text, marks)."""
    page.fill("#q", query)
    page.press("#q", "Enter")
    page.wait_for_selector(f"#status[data-query={css_string(query)}]", state="attached", timeout=timeout)
    return page.eval_on_selector_all(
        "li.hit",
        """els => els.map(e => ({chunk: Number(e.dataset.chunk), id: e.dataset.id, score: Number(e.dataset.score),
                                 title: e.querySelector('.title').textContent,
                                 href: (e.querySelector('.title a') || {getAttribute: () => null}).getAttribute('href'),
                                 heading: (e.querySelector('.heading') || {}).textContent || '',
                                 snippet: e.querySelector('.snippet').textContent,
                                 marks: [...e.querySelectorAll('mark')].map(m => m.textContent),
                                 elements: [...e.querySelectorAll('*')].map(x => x.tagName.toLowerCase())}))""",
    )
