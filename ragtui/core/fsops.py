"""The filesystem seam of the writers: one method per system call, so tests can record or fail any one.

The index publish (``core.ingest.publish``) and the export's swap (``core.export.writer``) make every
filesystem call through an ``FsOps`` object (``OS_OPS`` unless one is passed).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
from pathlib import Path

__all__ = ["OS_OPS", "FsOps"]


class FsOps:
    """The filesystem calls of the writer, one method per system call.

    Each method does exactly that call through ``os`` (looked up at call
    time) and raises ``OSError`` as the call does. A subclass may record
    calls or raise instead of calling; ``publish`` relies on nothing else.
    """

    def mkdir(self, path: Path) -> None:
        os.mkdir(path, 0o755)

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        return os.open(path, flags | os.O_CLOEXEC, mode)

    def write(self, fd: int, data: memoryview) -> int:
        return os.write(fd, data)

    def copy_range(self, src_fd: int, dst_fd: int, count: int, offset: int) -> int:
        """Copy up to ``count`` bytes of ``src_fd`` from ``offset`` to ``dst_fd``'s position, in the kernel.

        Like ``write``, returns how many bytes it copied. Where the kernel
        cannot copy between these files, reads and writes them instead.
        """
        try:
            return os.copy_file_range(src_fd, dst_fd, count, offset)
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
                raise
        data = os.pread(src_fd, min(count, 1 << 24), offset)
        if not data:
            return 0
        return os.write(dst_fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def rename(self, src: Path, dst: Path) -> None:
        os.rename(src, dst)

    def exchange(self, a: Path, b: Path) -> None:
        """Swap two names atomically (renameat2 RENAME_EXCHANGE); OSError(ENOSYS/EINVAL) if unsupported."""
        fn = getattr(_libc(), "renameat2", None)
        if fn is None:
            raise OSError(errno.ENOSYS, "renameat2 is not available")
        at_fdcwd, rename_exchange = -100, 2
        if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(a), None, str(b))

    def symlink(self, target: str, path: Path) -> None:
        os.symlink(target, path)

    def unlink(self, path: Path) -> None:
        os.unlink(path)

    def rmdir(self, path: Path) -> None:
        os.rmdir(path)


OS_OPS = FsOps()
"""The calls ``publish`` makes unless given ``ops``; tests may replace it to inject faults."""

@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)
