import os
import resource
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


@pytest.fixture
def bounded_memory():
    """At most 1 GiB more address space for the test: a regression that reads /dev/zero or an 8 GiB file to
    the end fails with MemoryError instead of exhausting the machine. (Only for the tests that plant such
    files: they start no thread pools, whose reservations would count against the cap.)"""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    limit = vm + (1 << 30) if hard == resource.RLIM_INFINITY else min(vm + (1 << 30), hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture
def fifo_guard(bounded_memory):
    """Make FIFOs through this; each is opened for writing (non-blocking) at teardown to free a blocked reader."""
    made: list[Path] = []

    def mkfifo(path: Path) -> None:
        os.mkfifo(path)
        made.append(path)

    yield mkfifo
    for path in made:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass  # no reader waiting: nothing to free
