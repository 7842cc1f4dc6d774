"""Keep the memory one sync freed for the next, and give it back once the agent is idle.

A publish at 100k chunks allocates and frees a few hundred MB of numpy
arrays. With glibc's defaults every array above 32 MB is a fresh ``mmap``
whose pages are faulted in (and zeroed) again on every save, and freed heap
is trimmed back to the kernel at once; on this workload that is a third of
the sync's time (bench/bench_watch.py: 1.27 s -> 0.86 s at 100k chunks).
So while the agent is busy, freed memory stays in the process
(``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` raised), and after
``IDLE_RELEASE_SECONDS`` without a sync ``malloc_trim(0)`` returns it.

These are settings of the whole process, and glibc cannot put them back:
it has no call that reads them, and setting ``M_MMAP_THRESHOLD`` at all
turns off its dynamic threshold for good. So only a process that is the
agent's alone sets them: the ``ragtui watch`` command. ``WatchAgent`` never
does (an application that embeds it, such as the TUI with ``--watch``,
keeps its allocator as it was); it calls its ``on_idle`` callback, which the
command points at ``release_freed_memory``.

Only glibc has these knobs; elsewhere every call here does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import os

__all__ = ["IDLE_RELEASE_SECONDS", "release_freed_memory", "retain_freed_memory"]

IDLE_RELEASE_SECONDS = 600.0

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


@functools.cache
def _glibc():
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
        return libc
    except (OSError, ValueError, AttributeError):
        return None


def retain_freed_memory() -> bool:
    """Let freed blocks up to 1 GiB stay in the heap for reuse; True if the allocator took it."""
    libc = _glibc()
    if libc is None:
        return False
    ok = libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30) == 1
    ok = libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30) == 1 and ok
    return ok


def release_freed_memory() -> bool:
    """Return the heap's free pages to the kernel; True if any were."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))
