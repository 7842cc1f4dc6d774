"""The browser tests skip only when Chromium is missing and RAGTUI_REQUIRE_BROWSER is unset."""

from __future__ import annotations

import pytest

from tests.helpers import browser


def test_missing_chromium_skips_or_fails(monkeypatch, tmp_path):
    monkeypatch.setattr(browser, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    monkeypatch.setattr(browser, "_REQUIRED", False)
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        browser.require_browser()
    monkeypatch.setattr(browser, "_REQUIRED", True)
    with pytest.raises(pytest.fail.Exception, match="RAGTUI_REQUIRE_BROWSER is set"):
        browser.require_browser()


def test_the_variable_is_read_before_conftest_clears_it():
    import os
    import subprocess
    import sys

    code = "import tests.helpers.browser as b; print(b._REQUIRED)"
    env = {**os.environ, "RAGTUI_REQUIRE_BROWSER": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "True"
