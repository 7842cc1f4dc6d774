"""A cache of derived arrays outside the index directory: it only ever saves time.

An entry is a directory ``<cache_dir>/<kind>-<name>-<key>/`` of ``.npy``
files plus a ``complete`` marker written last; it is created under a
temporary name and renamed into place, so a half-written entry is never
read. ``key`` must be derived from everything the arrays depend on (the
callers hash the source file's full content), so a stale entry cannot be
found. Any failure to read or write an entry falls back to computing the
arrays; the result is the same either way.
"""

from __future__ import annotations

import errno
import fcntl
import io
import mmap
import os
import shutil
import stat
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ragtui.core.files import remove_dead_temporaries

__all__ = [
    "BuildLock", "Placer", "StreamedEntry", "cached_arrays", "drop_pages", "evict", "load_entry",
    "mark_used", "remove_dead_temporaries", "store_arrays", "store_streamed", "used", "used_marker",
]

_MARKER = "complete"


def cached_arrays(
    cache_dir: Path | None,
    kind: str,
    name: str,
    key: str,
    compute: Callable[[], dict[str, np.ndarray]],
    keep: int = 2,
    lock: str | None = None,
) -> tuple[dict[str, np.ndarray], bool]:
    """Return (arrays, came_from_cache); arrays from the cache are read-only memory maps.

    ``keep`` entries of the same kind and name are kept (the newest ones), so
    a stream of publishes does not fill the disk. With ``lock``, a miss waits
    for the ``BuildLock`` of that name, looks again, and computes holding it:
    an entry that another process (a writer) is making is waited for, not
    made twice.
    """
    if cache_dir is None:
        return compute(), False
    entry = Path(cache_dir) / f"{kind}-{name}-{key}"
    found = load_entry(cache_dir, kind, name, key)
    if found:
        return found, True
    if lock is not None:
        with BuildLock.wait(cache_dir, lock):
            # Whoever held it may have stored this very entry.
            found = load_entry(cache_dir, kind, name, key)
            if found:
                return found, True
            return _compute_and_store(cache_dir, kind, name, entry, compute, keep), False
    return _compute_and_store(cache_dir, kind, name, entry, compute, keep), False


def _compute_and_store(cache_dir: Path, kind: str, name: str, entry: Path,
                       compute: Callable[[], dict[str, np.ndarray]], keep: int) -> dict[str, np.ndarray]:
    arrays = compute()
    try:
        _store(entry, arrays)
        _evict(Path(cache_dir), f"{kind}-{name}-", keep)
    except OSError:
        pass  # a read-only or full disk costs time on the next load, nothing else
    return arrays


def load_entry(cache_dir: Path, kind: str, name: str, key: str,
               stats: dict[str, os.stat_result] | None = None) -> dict[str, np.ndarray] | None:
    """The arrays of a complete entry, memory-mapped, or None when there is none or it cannot be read.

    Nothing is computed or written. Entries are files like any other: what
    they hold is only as good as what the caller checks of it. ``stats``,
    when given, receives each file's ``fstat`` as it was mapped, by path (a
    caller that keeps the maps can tell later whether the files are still those).
    """
    entry = Path(cache_dir) / f"{kind}-{name}-{key}"
    try:
        if not (entry / _MARKER).is_file():
            return None
        arrays = {}
        for p in entry.glob("*.npy"):
            arrays[p.stem], st = _load_stat(p)
            if stats is not None:
                stats[str(p)] = st
    except (OSError, ValueError):
        return None
    return arrays or None


_NPY_MAGIC = b"\x93NUMPY"


def _load(path: Path) -> np.ndarray:
    """One cached array, memory-mapped (``_load_stat``)."""
    return _load_stat(path)[0]


def _load_stat(path: Path) -> tuple[np.ndarray, os.stat_result]:
    """One cached array, memory-mapped, and the ``fstat`` of the file mapped.

    ``OSError`` unless it is a regular file (a FIFO would block the open);
    ``ValueError`` for anything that is not a plain ``.npy`` array (numpy
    would open a zip as an archive, and raises many kinds of errors on
    damaged headers).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if os.pread(fd, len(_NPY_MAGIC), 0) != _NPY_MAGIC:
            raise ValueError(f"{path} is not a .npy file")
        # numpy maps by name: name the file already opened and checked, not the path again.
        proc = f"/proc/self/fd/{fd}"
        try:
            with np.errstate(all="raise"):
                array = np.load(proc if os.path.exists(proc) else path, mmap_mode="r", allow_pickle=False)
        except OSError:
            raise
        except Exception as e:  # EOFError, OverflowError, tokenize errors...: a damaged header, whatever numpy says
            raise ValueError(f"{path}: {type(e).__name__}") from None
        if not isinstance(array, np.ndarray):
            raise ValueError(f"{path} is not an array")
        return array, st
    finally:
        os.close(fd)


def store_arrays(cache_dir: Path, kind: str, name: str, key: str, arrays: dict[str, np.ndarray]) -> bool:
    """Put ``arrays`` in the cache under ``key`` ahead of any reader (best effort, like every write here).

    True when the entry is there (stored now or before). Nothing is evicted
    here: the caller calls ``evict`` once it is off its critical path
    (deleting large files is slow on some filesystems).
    """
    entry = Path(cache_dir) / f"{kind}-{name}-{key}"
    if (entry / _MARKER).is_file():
        return True
    try:
        _store(entry, arrays)
    except OSError:
        return False
    return True


Placer = Callable[[int, int], int]
"""Writes an array's values where they go, in any order: given the open file and the offset of its first value,
it writes every value with ``os.pwrite`` and returns the number of bytes it wrote."""


def store_streamed(cache_dir: Path, kind: str, name: str, key: str,
                   streamed: dict[str, tuple[tuple[int, ...], np.dtype, Iterable[np.ndarray] | Placer]],
                   rest: Callable[[], dict[str, np.ndarray]]) -> bool:
    """``store_arrays`` for arrays too large to hold: each of ``streamed`` (shape, dtype, and either its rows
    block by block, in order, or a ``Placer`` that writes them in an order of its own) is written to its file
    as the values come, then the arrays ``rest()`` returns (which may depend on what was written). The values
    are written with ``write`` or ``pwrite``, not through a map, so the file's pages never count in this
    process's resident size. True when the entry is there (stored now or before)."""
    entry = Path(cache_dir) / f"{kind}-{name}-{key}"
    if (entry / _MARKER).is_file():
        return True
    tmp = entry.with_name(entry.name + f".tmp{os.getpid()}")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for array_name, (shape, dtype, blocks) in streamed.items():
            _write_blocks(tmp / f"{array_name}.npy", shape, np.dtype(dtype), blocks)
        _write_entry(tmp, rest(), fresh=False)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
        return False
    return _place(tmp, entry.name, mark=False)


def _write_blocks(path: Path, shape: tuple[int, ...], dtype: np.dtype,
                  blocks: Iterable[np.ndarray] | Placer) -> None:
    """A ``.npy`` file of ``shape`` and ``dtype`` (C order) from its rows in ``blocks`` (or written by a
    ``Placer``); OSError if they do not fill it."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": tuple(shape)}
    want = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    written = 0
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, header)
        start = f.tell()
        if callable(blocks):
            f.flush()
            written = blocks(f.fileno(), start)
        else:
            for block in blocks:
                data = np.ascontiguousarray(block, dtype=dtype)
                f.write(data.data)
                written += data.nbytes
    if written != want or path.stat().st_size != start + want:
        raise OSError(errno.EIO, f"{path.name}: {written} bytes written of {want}")


def evict(cache_dir: Path, kind: str, name: str, keep: int = 2) -> None:
    """Keep only the ``keep`` newest entries of ``kind`` and ``name`` (best effort)."""
    try:
        _evict(Path(cache_dir), f"{kind}-{name}-", keep)
    except OSError:
        pass


def used_marker(cache_dir: Path, kind: str, name: str) -> Path:
    """The empty file whose presence says a reader used the entries of ``kind`` of ``name`` (``mark_used``)."""
    return Path(cache_dir) / f".used-{kind}-{name}"


def mark_used(cache_dir: Path | None, kind: str, name: str) -> None:
    """Note that a reader searched with the entries of ``kind`` of ``name`` (best effort: a read-only cache
    notes nothing). A long-running writer makes such entries at each publish only once they are noted."""
    if cache_dir is None:
        return
    marker = used_marker(cache_dir, kind, name)
    try:
        if not marker.is_file():
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
            os.close(fd)
    except OSError:
        pass


def used(cache_dir: Path, kind: str, name: str) -> bool:
    """Whether a reader noted using the entries of ``kind`` of ``name`` (``mark_used``)."""
    return used_marker(cache_dir, kind, name).is_file()


class BuildLock:
    """While held, one process makes the entries of a name (``<cache_dir>/.build-<name>.lock``, an exclusive ``flock``).

    A writer takes it (``take``: never waits) before it makes a generation
    current and lets it go once the generation's derived entries are stored;
    a reader that misses such an entry waits for it (``wait``), then finds
    the entry instead of making its own. The kernel lets go of a dead
    holder's lock; a lock that cannot be had (a read-only cache, something
    else under the name) is not held, and the holder then just makes the
    entry as it would have.
    """

    def __init__(self, fd: int | None) -> None:
        # Let go when released, or when the holder drops it without (a publish that failed half way).
        self._close = weakref.finalize(self, os.close, fd) if fd is not None else None

    @property
    def held(self) -> bool:
        return self._close is not None and self._close.alive

    @classmethod
    def take(cls, cache_dir: Path, name: str) -> BuildLock:
        """The lock if it is free now (else one not held)."""
        return cls(_flock(Path(cache_dir) / f".build-{name}.lock", fcntl.LOCK_EX | fcntl.LOCK_NB))

    @classmethod
    def wait(cls, cache_dir: Path, name: str) -> BuildLock:
        """The lock, once whoever holds it lets go (not held if it cannot be had)."""
        return cls(_flock(Path(cache_dir) / f".build-{name}.lock", fcntl.LOCK_EX))

    def release(self) -> None:
        if self._close is not None:
            self._close()

    def __enter__(self) -> BuildLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _flock(path: Path, how: int) -> int | None:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        fcntl.flock(fd, how)
    except OSError:
        os.close(fd)
        return None
    return fd


class StreamedEntry:
    """Cache arrays written before their key is known, each a block at a time (arrays too large to hold whole).

    ``add`` writes one array's ``.npy`` file from its blocks (the bytes
    ``np.save`` writes for the whole array); ``place`` names the entry with
    its key once it is known. Best effort like every write here: after a
    failure to write, ``ok`` is False and ``place`` leaves no entry. Until
    placed the arrays are under a temporary name (never read; removed by
    ``discard`` or, once this process is gone, by the next writer).
    """

    def __init__(self, cache_dir: Path, kind: str, name: str, tag: str = "streamed") -> None:
        """``tag`` names the temporary directory beside the process's pid: writers of the same kind and name that
        may run at once in one process (a reader's and a writer's) each take their own."""
        self._prefix = f"{kind}-{name}-"
        tmp = Path(cache_dir) / f"{kind}-{name}-{tag}.tmp{os.getpid()}"
        self._tmp: Path | None = tmp
        try:
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
        except OSError:
            self._tmp = None

    @property
    def ok(self) -> bool:
        """Whether everything added so far is written."""
        return self._tmp is not None

    def add(self, key: str, dtype: np.dtype | type, n: int, blocks: Iterable[np.ndarray]) -> None:
        """The 1-d array ``key`` of ``n`` values of ``dtype``, given as ``blocks`` that follow each other."""
        column = self.column(key, dtype, n)
        for block in blocks:  # consumed even when nothing is written: the caller's work may depend on it
            column.write(block)
        column.close()

    def column(self, key: str, dtype: np.dtype | type, n: int | None = None) -> Column:
        """The 1-d array ``key`` of ``n`` values of ``dtype``, to be written a block at a time (several at once);
        ``n`` None: as many as are written (the count goes into the header when the column is closed)."""
        return Column(self, key, np.dtype(dtype), n)

    def place(self, key: str) -> bool:
        """Name the arrays as the entry of ``key``; True when that entry is there (placed now or before)."""
        tmp, self._tmp = self._tmp, None
        return _place(tmp, self._prefix + key, mark=True)

    def discard(self) -> None:
        """Remove what was written; nothing will be placed."""
        tmp, self._tmp = self._tmp, None
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


class Column:
    """One array of a ``StreamedEntry`` being written: its ``.npy`` header, then its blocks in order."""

    def __init__(self, entry: StreamedEntry, key: str, dtype: np.dtype, n: int | None) -> None:
        self._entry, self._key, self._dtype, self._n = entry, key, dtype, n
        self._written = 0
        self._file: BinaryIO | None = None
        tmp = entry._tmp
        if tmp is None:
            return
        try:
            self._file = open(tmp / f"{key}.npy", "wb")  # noqa: SIM115 - closed by close(), or on failure
            self._file.write(_npy_header(dtype, 0 if n is None else n))
        except OSError:
            self._fail()

    def write(self, block: np.ndarray) -> None:
        if self._file is None or self._entry._tmp is None:
            return
        block = np.ascontiguousarray(block, dtype=self._dtype)
        try:
            self._file.write(block.data)
        except OSError:
            self._fail()
        self._written += block.size

    def close(self) -> None:
        """Complete the array; a count of values other than announced is a caller's bug (``ValueError``)."""
        f, self._file = self._file, None
        if f is None:
            return
        try:
            if self._n is None:
                # The count is known now. A 1-d header's length does not depend on the count (it is padded to a
                # multiple of 64 bytes), so the one written first is replaced in place: the file np.save writes.
                header = _npy_header(self._dtype, self._written)
                if len(header) != len(_npy_header(self._dtype, 0)):
                    raise OSError(errno.EOVERFLOW, f"{self._key}: the header of {self._written} values is longer")
                f.seek(0)
                f.write(header)
            f.close()
        except OSError:
            self._file = f
            self._fail()
            return
        if self._n is not None and self._written != self._n and self._entry._tmp is not None:
            self._entry.discard()
            raise ValueError(f"{self._key}: {self._written} values written where {self._n} were announced")

    def _fail(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass
        self._entry.discard()


def _npy_header(dtype: np.dtype, n: int) -> bytes:
    """The ``.npy`` (version 1.0) header of a 1-d array of ``n`` values of ``dtype``, as ``np.save`` writes it."""
    header = np.lib.format.header_data_from_array_1_0(np.empty(0, dtype=dtype))
    header["shape"] = (n,)
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue()


def drop_pages(array: np.ndarray, upto: int, start: int = 0) -> None:
    """Let the kernel take back the resident pages of values ``start`` to ``upto`` of ``array`` (counted over
    the array's values, in memory order) when it is mapped from a file (an entry of ``load_entry``, an index's
    vectors.f32); nothing otherwise. Best effort, and only whole pages inside that range; the values stay what
    they are: a page touched again is read back from the page cache or the file. A pass over a large mapped
    array then holds a block of it resident, not all of it."""
    mapped = _map_of(array)
    if mapped is None or upto <= start or not hasattr(mmap, "MADV_DONTNEED"):
        return
    try:
        base = np.frombuffer(mapped, dtype=np.uint8).ctypes.data
        at = array.ctypes.data - base
        lo = at + max(0, start) * array.itemsize
        hi = at + min(upto, array.size) * array.itemsize
        lo += -lo % mmap.PAGESIZE
        hi -= hi % mmap.PAGESIZE
        if hi > lo:
            mapped.madvise(mmap.MADV_DONTNEED, lo, hi - lo)
    except (OSError, ValueError, TypeError):
        pass


def _map_of(array: np.ndarray) -> mmap.mmap | None:
    """The file map behind ``array`` (a ``np.load`` map, or an array made over an ``mmap`` or a memoryview of
    one), or None."""
    obj: object = array
    for _ in range(8):
        mapped = obj if isinstance(obj, mmap.mmap) else getattr(obj, "_mmap", None)
        if isinstance(mapped, mmap.mmap):
            return mapped
        obj = obj.obj if isinstance(obj, memoryview) else getattr(obj, "base", None)
        if obj is None:
            return None
    return None


def _place(tmp: Path | None, name: str, *, mark: bool) -> bool:
    """Rename the temporary entry ``tmp`` to ``name`` beside it (writing its ``complete`` marker first when
    ``mark``), unless a complete entry of that name is there already; then remove whatever is left of ``tmp``.
    True when the entry is there."""
    if tmp is None:
        return False
    entry = tmp.with_name(name)
    try:
        if not (entry / _MARKER).is_file():
            if mark:
                (tmp / _MARKER).write_bytes(b"")
            _rename_into(tmp, entry)
            os.utime(entry)
    except OSError:
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return True


def _write_entry(tmp: Path, arrays: dict[str, np.ndarray], fresh: bool = True) -> None:
    """The arrays and the ``complete`` marker in the new directory ``tmp`` (replacing what a failed attempt left;
    ``fresh`` False: in ``tmp`` as it is)."""
    if fresh:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    for key, value in arrays.items():
        np.save(tmp / f"{key}.npy", np.ascontiguousarray(value), allow_pickle=False)
    (tmp / _MARKER).write_bytes(b"")


def _rename_into(tmp: Path, entry: Path) -> None:
    if entry.is_symlink() or (os.path.lexists(entry) and not entry.is_dir()):
        entry.unlink()  # a file or link under the entry's name: in the way, never read
    shutil.rmtree(entry, ignore_errors=True)
    os.rename(tmp, entry)


def _store(entry: Path, arrays: dict[str, np.ndarray]) -> None:
    tmp = entry.with_name(entry.name + f".tmp{os.getpid()}")
    try:
        _write_entry(tmp, arrays)
        _rename_into(tmp, entry)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    os.utime(entry)


def _evict(cache_dir: Path, prefix: str, keep: int) -> None:
    entries = [p for p in cache_dir.iterdir() if p.name.startswith(prefix) and ".tmp" not in p.name]
    entries.sort(key=lambda p: p.stat().st_mtime_ns, reverse=True)
    for old in entries[keep:]:
        shutil.rmtree(old, ignore_errors=True)
    remove_dead_temporaries(cache_dir)
