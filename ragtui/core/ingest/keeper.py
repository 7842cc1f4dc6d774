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

import errno
import fcntl
import os
import stat
from collections.abc import Callable

from ragtui.core.errors import LockedError, StorageError
from ragtui.core.ingest.publish import flock_holder, rag_root

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
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        except OSError as e:
            raise StorageError(f"cannot open the watch lock {self.path}: {e.strerror}") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise StorageError(f"the watch lock {self.path} is not a regular file: remove it (with no watch running)")
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except OSError as e:
            holder = flock_holder(fd)
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                raise LockedError(refusal(f" (pid {holder})" if holder else "")) from None
            raise StorageError(f"cannot lock {self.path}: {e.strerror}") from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> KeeperLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
