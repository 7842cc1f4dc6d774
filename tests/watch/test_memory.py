"""The agent keeps freed heap memory while busy and gives it back once idle."""

from __future__ import annotations

import os
import threading

import pytest

from ragtui.watch import agent as agent_module
from ragtui.watch.memory import release_freed_memory, retain_freed_memory
from tests.watch import WAIT, harness_for, write

pytestmark = pytest.mark.timeout(120)


@pytest.fixture()
def harness(tmp_path):
    yield from harness_for(tmp_path)


@pytest.mark.skipif(not os.confstr("CS_GNU_LIBC_VERSION"), reason="the heap knobs are glibc's")
def test_glibc_takes_the_settings():
    assert retain_freed_memory() is True
    assert isinstance(release_freed_memory(), bool)


def test_memory_is_released_once_the_agent_is_idle(harness, monkeypatch):
    released = threading.Event()
    monkeypatch.setattr(agent_module, "IDLE_RELEASE_SECONDS", 0.0)
    monkeypatch.setattr(agent_module, "release_freed_memory", released.set)
    write(harness.folder / "a.md", "alpha\n")
    agent, rec = harness.agent(root_check_seconds=0.05)
    rec.wait_for(lambda: rec.publishes, "the start reconcile's publish")
    assert released.wait(WAIT), "the idle agent never released its memory"
    released.clear()
    # Released once per idle spell: nothing more until another sync happened.
    write(harness.folder / "a.md", "alpha edited\n")
    rec.wait_for(lambda: len(rec.publishes) == 2, "the edit's publish")
    assert released.wait(WAIT)
