"""Which indexes a running ``ragtui watch`` keeps up to date, so that ``ragtui rm`` does not race it.

The writer lock (``publish.IndexLock``) is held only while a sync runs; a
watch agent between two saves holds nothing, and an index removed then would
be rebuilt by the agent's next sync, so the removal would not stick. An agent
therefore holds a second lock for its whole life: a *shared* ``flock`` on
``rag/.locks/<index_id>.watch`` (several agents may keep one index, as before).
``remove_index`` takes the same file *exclusively* and without waiting, so:

* while any agent keeps the index, ``ragtui rm`` is ``LockedError`` (exit 3)
  naming the agent's pid and nothing is removed;
* while a removal runs, an agent that starts for the index is refused the
  same way instead of rebuilding what is being deleted.

The kernel drops a flock when its holder dies, so a killed agent never blocks
a removal. Nothing is ever written into the file (a watch that changes
nothing must not touch the artifacts root beyond creating it once).
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable

from ragtui.core.ingest.publish import rag_root, release_flock, take_flock

__all__ = ["KeeperLock"]


class KeeperLock:
    """The ``.watch`` lock of one index: ``keep()`` (shared, an agent) or ``remove()`` (exclusive, ``rm``)."""

    def __init__(self, artifacts: str | os.PathLike[str], index_id: str) -> None:
        self.path = rag_root(artifacts) / ".locks" / f"{index_id}.watch"
        self.index_id = index_id
        self._fd: int | None = None

    def keep(self) -> KeeperLock:
        """Hold the lock shared, for a watch agent's lifetime (``LockedError`` while the index is being removed)."""
        return self._take(fcntl.LOCK_SH, lambda who: (
            f"index {self.index_id!r} is being removed by another process{who}; watch it again once that is done"))

    def remove(self) -> KeeperLock:
        """Hold the lock exclusively, for a removal (``LockedError`` while an agent keeps the index)."""
        return self._take(fcntl.LOCK_EX, lambda who: (
            f"index {self.index_id!r} is kept up to date by `ragtui watch`{who}, which would rebuild it: "
            "stop the watch first, then remove the index"))

    def _take(self, mode: int, refusal: Callable[[str], str]) -> KeeperLock:
        self._fd = take_flock(self.path, mode, "the watch lock", "with no watch running", refusal)
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            release_flock(fd)

    def __enter__(self) -> KeeperLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
