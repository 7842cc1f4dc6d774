"""Let go of an old generation's memory off the caller's path.

A reader that moves to a new generation drops the last references to the
old one: its maps of the four files and of the cache's arrays. The writer has
removed those files by then, so unmapping them also frees their pages from
the page cache, and at 100k chunks (some 370 MB of pages) that takes a few
hundred milliseconds, which a reload would otherwise spend before the query
that asked for it could run. ``release_later`` hands the objects to one
daemon thread that drops them there; the kernel's unmap runs without the
GIL, so the caller's query goes on meanwhile. What is released is only ever
memory: nothing is read or written.
"""

from __future__ import annotations

import os
import queue
import threading

__all__ = ["release_later", "wait_released"]

_lock = threading.Lock()
_queue: queue.Queue[tuple[object, ...]] = queue.Queue()
_thread: threading.Thread | None = None


def _run(q: queue.Queue[tuple[object, ...]]) -> None:
    while True:
        held = q.get()
        del held  # the last references: the maps go here, in this thread
        q.task_done()


def release_later(*objects: object) -> None:
    """Drop ``objects`` in the releasing thread (the caller must hold no other reference it keeps)."""
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, args=(_queue,), name="ragtui-release", daemon=True)
            _thread.start()
        _queue.put(objects)


def wait_released() -> None:
    """Return once everything handed to ``release_later`` so far has been dropped."""
    _queue.join()


def _after_fork() -> None:
    # A child has no releasing thread and may have forked while the queue's lock was held.
    global _lock, _queue, _thread
    _lock, _queue, _thread = threading.Lock(), queue.Queue(), None


os.register_at_fork(after_in_child=_after_fork)
