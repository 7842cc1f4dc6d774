"""A reader in a thread of its own that is seen waiting on a writer's build lock (``BuildLock.wait``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

from ragtui.core.index.arraycache import BuildLock


def waiting_reader(monkeypatch, search: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Start ``search`` in a thread and return once it waits on a build lock: (the thread, its result list)."""
    waiting = threading.Event()
    real_wait = BuildLock.wait.__func__

    def wait(cls, *a):
        waiting.set()
        return real_wait(cls, *a)

    monkeypatch.setattr(BuildLock, "wait", classmethod(wait))
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(search()))
    reader.start()
    assert waiting.wait(60), "the reader did not wait for the lock"
    return reader, got
