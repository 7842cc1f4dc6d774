"""Keep the memory one sync freed for the next, and give it back once the agent is idle.

A publish at 100k chunks allocates and frees a few hundred MB of numpy
arrays. With glibc's defaults every array above 32 MB is a fresh ``mmap``
whose pages are faulted in (and zeroed) again on every save, and freed heap
is trimmed back to the kernel at once; on this workload that is a third of
the sync's time (bench/bench_watch.py: 1.27 s -> 0.86 s at 100k chunks).
So while the agent is busy, freed memory stays in the process
(``M_MMAP_THRESHOLD`` and ``M_TRIM_THRESHOLD`` raised), and after
``IDLE_RELEASE_SECONDS`` without a sync ``malloc_trim(0)`` returns it. An
index too large for that to help (see below) has it returned before each
save instead (``release_before_save``).

These are settings of the whole process, and glibc cannot put them back:
it has no call that reads them, and setting ``M_MMAP_THRESHOLD`` at all
turns off its dynamic threshold for good. So only a process that is the
agent's alone sets them: the ``ragtui watch`` command. ``WatchAgent`` never
does (an application that embeds it, such as the TUI with ``--watch``,
keeps its allocator as it was); it calls its ``on_idle`` callback, which the
command points at ``release_freed_memory``.

The agent syncs in a thread of its own, and there glibc keeps only what
fits in the thread's arena heaps (64 MiB each): a larger array is a map of
its own whatever ``M_MMAP_THRESHOLD`` says, faulted in afresh by every save
and returned when freed. A save's arrays of 8 bytes a posting pass that size
at about 7.8 million postings (some 130k chunks): above it, what stays
between saves is the smaller arrays only.

The warm-up after the agent's start does not run a splice (its temporaries
made the start the agent's peak), so the first save would fault in the heap
it works in; ``grow_heap_for`` faults that in at the warm-up instead, as much
as the save will keep (only in a process that retains: ``retaining``).

Only glibc has these knobs; elsewhere every call here does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import os

__all__ = [
    "GROW_LIMIT", "IDLE_RELEASE_SECONDS", "grow_heap", "grow_heap_for", "release_before_save", "release_freed_memory",
    "retain_freed_memory", "retaining",
]

IDLE_RELEASE_SECONDS = 600.0
GROW_LIMIT = 768 << 20
"""The most ``grow_heap`` faults in."""
GROW_BLOCK = 60 << 20
"""``grow_heap`` allocates this much at a time (see there)."""
SPLICE_HEAP_PER_POSTING = 64
"""About the heap a one-file save works in, per posting of the generation it splices from: at 100k chunks
(5.9 million postings) the agent's first save grew its resident memory by 360-490 MiB."""
_retaining = False

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
        libc.malloc.argtypes = (ctypes.c_size_t,)
        libc.malloc.restype = ctypes.c_void_p
        libc.free.argtypes = (ctypes.c_void_p,)
        return libc
    except (OSError, ValueError, AttributeError):
        return None


def retain_freed_memory() -> bool:
    """Let freed blocks up to 1 GiB stay in the heap for reuse; True if the allocator took it."""
    libc = _glibc()
    if libc is None:
        return False
    global _retaining
    ok = libc.mallopt(_M_MMAP_THRESHOLD, 1 << 30) == 1
    ok = libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30) == 1 and ok
    _retaining = _retaining or ok
    return ok


def retaining() -> bool:
    """Whether this process keeps freed memory (``retain_freed_memory`` succeeded)."""
    return _retaining


def grow_heap(nbytes: int) -> bool:
    """In a process that retains freed memory: fault in ``nbytes`` of heap (at most ``GROW_LIMIT``) and free them,
    so that the next sync's arrays take pages already in memory. True if it did.

    The heap is grown ``GROW_BLOCK`` bytes at a time: in a thread other than the main one, glibc serves a
    request larger than its arena's heaps (64 MiB) with a map of its own, returned when freed. Measured in a
    thread (glibc 2.35, 360 MiB asked): blocks of 32 to 60 MiB stay in the process once freed (300-352 MiB),
    blocks of 8 or 16 MiB do not (48-56 MiB).
    """
    libc = _glibc()
    if libc is None or not _retaining or nbytes <= 0:
        return False
    blocks = []
    try:
        for _ in range(-(-min(nbytes, GROW_LIMIT) // GROW_BLOCK)):
            block = libc.malloc(GROW_BLOCK)
            if not block:
                break
            blocks.append(block)
            ctypes.memset(block, 0, GROW_BLOCK)  # every page written: now in memory
    finally:
        for block in blocks:
            libc.free(block)
    return bool(blocks)


def grow_heap_for(postings: int) -> bool:
    """``grow_heap`` by the heap a save spliced from ``postings`` postings works in, when it will keep it.

    In the agent's thread a save's arrays of 8 bytes a posting stay in the heap while they fit in one of the
    thread's heaps (``GROW_BLOCK``; up to about 7.8 million postings, some 130k chunks); larger ones are maps of
    their own, faulted in afresh by every save, the first included: nothing is grown ahead then.
    """
    if postings <= 0 or 8 * postings > GROW_BLOCK:
        return False
    return grow_heap(SPLICE_HEAP_PER_POSTING * postings)


def release_before_save(postings: int) -> bool:
    """In a process that retains freed memory, before a save spliced from ``postings`` postings: give the freed
    heap back when the save's large arrays cannot use it (``grow_heap_for``'s bound: above it they are maps of
    their own). What was freed since the last save (the derived entries' builds, the state's reading) would
    otherwise stay resident under the save's own arrays and add to its peak. True if any was given back."""
    if not _retaining or 8 * postings <= GROW_BLOCK:
        return False
    return release_freed_memory()


def release_freed_memory() -> bool:
    """Return the heap's free pages to the kernel; True if any were."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))
