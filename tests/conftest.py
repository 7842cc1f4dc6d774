import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path_factory):
    """Keep the user's own configuration and artifacts out of every test."""
    for name in list(os.environ):
        # RAGTUI_REQUIRE_* say what this test run must have (CI sets them): they stay.
        if name.startswith("RAGTUI_") and not name.startswith("RAGTUI_REQUIRE_"):
            monkeypatch.delenv(name, raising=False)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    # The default artifacts root (without /artifacts) and the index used last live here: never the user's own.
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test with the reason when it is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (../shared/data ships beside the repository only for developers and CI)")
    return path
