import os

import pytest

from ragtui.tui import fmt
from ragtui.tui.ragtui_app import RagtuiApp
from tests.tui import Notices, build_demo


@pytest.fixture(autouse=True)
def _tui_isolation(monkeypatch, tmp_path):
    """No blinking cursor, no editor, history, cache or terminal settings of the person running the tests."""
    monkeypatch.setattr(RagtuiApp, "CURSOR_BLINK", False)
    for name in list(os.environ):
        # TEXTUAL_SNAPSHOT_* belong to the snapshot plugin, not to the person.
        if name in ("EDITOR", "VISUAL") or (name.startswith("TEXTUAL_") and not name.startswith("TEXTUAL_SNAPSHOT")):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # packs (p) go there


@pytest.fixture
def notices() -> Notices:
    """The notifications of the app run with ``app.run_test(message_hook=notices)``."""
    return Notices()


@pytest.fixture
def stable_times(monkeypatch):
    """Fixed durations on screen, for snapshots."""
    monkeypatch.setattr(fmt, "ms", lambda seconds: "0.42 ms")
    monkeypatch.setattr(fmt, "seconds", lambda seconds: "12 ms")


@pytest.fixture(scope="session")
def demo_index(tmp_path_factory):
    """(artifacts, folder) of the demo index, shared read-only by the tests that only search it."""
    return build_demo(tmp_path_factory.mktemp("demo"))


@pytest.fixture
def own_demo(tmp_path):
    """(artifacts, folder) of a demo index this test may change."""
    return build_demo(tmp_path)

