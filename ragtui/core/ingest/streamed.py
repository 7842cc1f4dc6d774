"""The full rebuild's three streamed files, and giving freed memory back between its stages.

``StreamedFile`` is docs.jsonl, vectors.f32 or bm25.idx of the next
generation, written as it is made; with a published generation to compare
with, it is compared with that generation's file while equal to it, and the
new file is started only at the first difference. ``same_meta`` compares
meta.json once it is encoded. ``give_back`` returns the heap's free pages to
the kernel.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from ragtui.core.index.index_format import META
from ragtui.core.ingest.publish import FileRange, GenerationFile, NewGeneration

__all__ = ["StreamedFile", "give_back", "same_meta"]


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim.argtypes = (ctypes.c_size_t,)
        return libc
    except (OSError, ValueError, AttributeError):
        return None


def give_back() -> None:
    """Return the heap's free pages to the kernel (glibc's ``malloc_trim``; elsewhere nothing).

    Between the rebuild's stages most of what the last one held is free but
    stays in the heap, scattered among what is still alive, so the resident
    size would keep it while the next stage allocates its own: at 100k chunks
    about 120 MiB at each of the two points this is called.
    """
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


def same_meta(published: Path, meta: bytes) -> bool:
    """Whether the published meta.json is ``meta`` but for created_at."""
    try:
        old_meta = json.loads((published / META).read_bytes())
        new_meta = json.loads(meta)
    except (OSError, ValueError):
        return False
    old_meta.pop("created_at", None)
    new_meta.pop("created_at", None)
    return bool(old_meta == new_meta)


class StreamedFile:
    """docs.jsonl, vectors.f32 or bm25.idx of the next generation, written as it is made.

    With a published generation to compare with, the bytes are compared with
    its file while they are equal to it; at the first difference the new
    generation's file is started (``begin``), its bytes so far copied from
    the published file (they are the same).
    """

    def __init__(self, name: str, compare: Path | None, start: Callable[[], NewGeneration]) -> None:
        self.name, self._start = name, start
        self.size = 0
        """Bytes made so far."""
        self.file: GenerationFile | None = None
        self._old: int | None = None
        self._old_size = 0
        self._read: int | None = None
        if compare is not None:
            try:
                fd = os.open(compare / name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError:
                fd = None
            if fd is not None:
                st = os.fstat(fd)
                if stat.S_ISREG(st.st_mode):
                    self._old, self._old_size = fd, st.st_size
                else:
                    os.close(fd)

    def __enter__(self) -> StreamedFile:
        if self._old is None:
            self.begin()
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in (self._old, self._read):
            if fd is not None:
                os.close(fd)
        self._old = self._read = None

    def begin(self) -> None:
        """Start the new generation's file, with the bytes made so far (the compared file's)."""
        if self.file is not None:
            return
        self.file = self._start().stream(self.name)
        if self.size:
            assert self._old is not None
            self.file.write([FileRange(self._old, 0, self.size)])

    def write(self, data: bytes) -> None:
        if self.file is None:
            assert self._old is not None
            end = self.size + len(data)
            if end <= self._old_size and os.pread(self._old, len(data), self.size) == data:
                self.size = end
                return
            self.begin()
        assert self.file is not None
        self.file.write(data)
        self.size += len(data)

    def read_back(self, offset: int, n: int) -> bytes:
        """``n`` bytes made before, from ``offset``."""
        if self.file is None:
            assert self._old is not None
            return os.pread(self._old, n, offset)
        if self._read is None:
            self._read = os.open(self.file.path, os.O_RDONLY | os.O_CLOEXEC)
        return os.pread(self._read, n, offset)

    def same(self) -> bool:
        """Whether every byte made is the compared file's, and nothing of it is left over."""
        return self.file is None and self.size == self._old_size

    def finish(self) -> None:
        """Complete the new generation's file and flush it."""
        self.begin()
        assert self.file is not None
        self.file.close()
