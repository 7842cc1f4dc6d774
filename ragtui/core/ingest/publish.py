"""The index writer: encode the four files, lock, and publish atomically.

Layout under ``<artifacts>/rag/`` (see spec/index-format.md, "Publishing"):

    <index_id>            a symbolic link to the current generation directory
    .gen/<index_id>/<g>/  generation directories, each holding exactly the four files
    .locks/<index_id>.lock   the writer lock (flock; released by the kernel if the writer dies)
    .state/<index_id>/    writer state that only saves time (file hash cache, embedded vectors)

Publishing writes a new generation directory, flushes every file and the
directory, then renames a fresh link over ``<index_id>`` (one atomic rename)
and flushes ``rag/``. A reader resolves the link once and opens all four
files from that one generation, so it sees the old index or the new one,
never a mix; a writer killed at any point leaves the old link and its
generation untouched, and the next writer removes what it left behind
(``remove_leftovers``). spec/reliability.md lists the steps and what each
failure leaves.

Every filesystem call the writer makes goes through an ``FsOps`` object
(``OS_OPS`` unless one is passed), so tests can record the calls or make
any one of them fail.

Over 500 lines on purpose: the paths, the lock and the publish steps are one protocol,
each step's failure spelled out beside it; split, each part would only make sense read with the others.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ragtui.core.errors import LockedError, StorageError, UsageError
from ragtui.core.fsops import OS_OPS, FsOps
from ragtui.core.index.arraycache import remove_dead_temporaries
from ragtui.core.index.bm25 import Postings
from ragtui.core.index.bm25_write import build_postings, build_postings_from_texts, encode_postings
from ragtui.core.index.index_format import BM25, DOCS, FILES, META, VECTORS
from ragtui.core.index.records import ChunkRecord, IndexMeta, encode_docs, encode_meta, encode_vectors

__all__ = [
    "OS_OPS", "FileRange", "FsOps", "GenerationFile", "IndexLock", "NewGeneration", "check_index_id", "encode_index", "file_size",
    "flock_holder", "index_dir", "publish", "release_flock",
    "rag_root", "remove_leftovers", "remove_stale_generations", "state_dir", "take_flock", "utc_now",
]


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rag_root(artifacts: str | os.PathLike[str]) -> Path:
    return Path(artifacts) / "rag"


def index_dir(artifacts: str | os.PathLike[str], index_id: str) -> Path:
    check_index_id(index_id)
    return rag_root(artifacts) / index_id


def state_dir(artifacts: str | os.PathLike[str], index_id: str) -> Path:
    return rag_root(artifacts) / ".state" / index_id


def check_index_id(index_id: str) -> None:
    if (
        not index_id
        or index_id.startswith(".")
        or "/" in index_id
        or "\0" in index_id
        or "\\" in index_id
        or len(index_id.encode("utf-8")) > 200
    ):
        raise UsageError(
            f"invalid index id {index_id!r}: use a plain folder name (no '/', not starting with '.')"
        )


def encode_index(
    meta: IndexMeta,
    records: Sequence[ChunkRecord],
    vectors: np.ndarray,
    doc_terms: Sequence[Sequence[str]] | None = None,
    postings: Postings | None = None,
) -> dict[str, bytes]:
    """The four files' bytes. Deterministic: only ``meta.created_at`` varies between runs.

    The caller may pass the BM25 ``postings`` (to keep them, e.g. for the
    readers' cache) or ``doc_terms`` (each chunk's analyzed terms) when it
    already has them; otherwise the texts are analyzed here.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.shape != (len(records), meta.dim) or meta.n_chunks != len(records):
        raise ValueError("records, vectors and meta disagree on n_chunks or dim")
    if postings is None:
        postings = build_postings(doc_terms) if doc_terms is not None else build_postings_from_texts(r.text for r in records)
    return {
        META: encode_meta(meta),
        DOCS: encode_docs(records),
        VECTORS: encode_vectors(vectors),
        BM25: encode_postings(postings),
    }


# -- the filesystem seam: core/fsops.py (FsOps, OS_OPS), shared with the export's swap ---------------


class IndexLock:
    """One writer per index: an exclusive, non-blocking ``flock`` outside the index directory.

    The kernel drops the lock when the holder dies, so a lock left by a
    killed writer never blocks; the file itself may stay and is reused. The
    holder's pid, for the refusal message, comes from /proc/locks.
    """

    def __init__(self, artifacts: str | os.PathLike[str], index_id: str) -> None:
        self.path = rag_root(artifacts) / ".locks" / f"{index_id}.lock"
        self.index_id = index_id
        self._fd: int | None = None

    def acquire(self) -> IndexLock:
        # Nothing is written into the lock file: a sync that changes nothing
        # must not even touch it.
        self._fd = take_flock(self.path, fcntl.LOCK_EX, "the writer lock", "with no writer running", lambda who: (
            f"index {self.index_id!r} is being written by another process{who}; wait for it to finish or stop it"))
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            release_flock(fd)

    def __enter__(self) -> IndexLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def take_flock(path: Path, mode: int, what: str, when_free: str, refusal: Callable[[str], str]) -> int:
    """Open the lock file ``path`` (made if missing) and ``flock`` it in ``mode`` without waiting; its descriptor.

    ``what`` names the lock in errors and ``when_free`` says when it may be
    removed; ``refusal(" (pid N)")`` is the ``LockedError`` message when
    another process holds it. A lock file that is not a regular file is a
    ``StorageError`` and is left alone: a holder may have the file it displaced.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise StorageError(f"cannot open {what} {path}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StorageError(f"{what} {path} is not a regular file: remove it ({when_free})")
    try:
        fcntl.flock(fd, mode | fcntl.LOCK_NB)
    except OSError as e:
        holder = flock_holder(fd)
        os.close(fd)
        if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
            raise LockedError(refusal(f" (pid {holder})" if holder else "")) from None
        raise StorageError(f"cannot lock {path}: {e.strerror}") from None
    return fd


def release_flock(fd: int) -> None:
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def flock_holder(fd: int) -> str:
    """The pid holding a flock on ``fd``'s file, from /proc/locks ("" when unknown)."""
    try:
        st = os.fstat(fd)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                parts = line.split()
                # "1: FLOCK  ADVISORY  WRITE 12345 fd:01:2146828 0 EOF"
                if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].endswith(f":{st.st_ino}"):
                    return parts[4]
    except OSError:
        pass
    return ""


# -- publishing ----------------------------------------------------------------------------------


class _Step:
    """The step in progress, named in the error message."""

    what = "starting"

    def __call__(self, what: str) -> None:
        self.what = what


def _fsync_dir(ops: FsOps, path: Path) -> None:
    fd = ops.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        ops.fsync(fd)
    finally:
        ops.close(fd)


def _write_file(ops: FsOps, path: Path, data: FileContent, step: _Step) -> None:
    step(f"creating {path}")
    fd = ops.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        step(f"writing {path}")
        _write_pieces(ops, fd, data)
        step(f"flushing {path} to disk")
        ops.fsync(fd)
    finally:
        ops.close(fd)


def _write_pieces(ops: FsOps, fd: int, data: FileContent) -> None:
    for piece in _pieces(data):
        if isinstance(piece, FileRange):
            offset, left = piece.offset, piece.length
            while left:
                n = ops.copy_range(piece.fd, fd, left, offset)
                if n <= 0:
                    raise OSError(errno.EIO, "the file copied from is shorter than expected")
                offset, left = offset + n, left - n
            continue
        view = memoryview(piece).cast("B")
        while view:
            n = ops.write(fd, view)
            view = view[n:]


@dataclass(frozen=True)
class FileRange:
    """``length`` bytes of the open file ``fd`` from ``offset``: a piece ``publish`` copies in the kernel."""

    fd: int
    offset: int
    length: int


FileContent = bytes | bytearray | memoryview | Sequence[bytes | bytearray | memoryview | FileRange]
"""One file's content for ``publish``: a buffer, or buffers and ``FileRange`` pieces written in order."""


def _pieces(data: FileContent) -> Sequence[bytes | bytearray | memoryview | FileRange]:
    """A file's content: one buffer, or a sequence of buffers and ``FileRange`` written one after another."""
    return (data,) if isinstance(data, (bytes, bytearray, memoryview)) else data


def file_size(data: FileContent) -> int:
    """The number of bytes ``publish`` writes for one file's content."""
    return sum(p.length if isinstance(p, FileRange) else memoryview(p).nbytes for p in _pieces(data))


def _make_dirs(ops: FsOps, path: Path, step: _Step) -> None:
    """``mkdir -p``, flushing each parent that gained an entry so the new folders survive a crash."""
    missing = []
    p = path
    while not p.is_dir():
        missing.append(p)
        if p.parent == p:
            break
        p = p.parent
    for d in reversed(missing):
        step(f"creating {d}")
        try:
            ops.mkdir(d)
        except FileExistsError:
            continue  # another process made it meanwhile
        step(f"flushing {d.parent} to disk")
        _fsync_dir(ops, d.parent)


def _hint(e: OSError) -> str:
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some disk space and run again"
    if e.errno in (errno.EACCES, errno.EPERM):
        return "check that you may write there"
    if e.errno == errno.EROFS:
        return "the filesystem is mounted read-only"
    if e.errno == errno.EIO:
        return "the disk reported an I/O error; check it before writing again"
    return "run again once the cause is fixed"


def publish(artifacts: str | os.PathLike[str], index_id: str, files: Mapping[str, FileContent], *, ops: FsOps | None = None, tidy: bool = True,
            before_swap: Callable[[Path], object] | None = None) -> Path:
    """Publish ``files`` (the four names) as the new generation of ``index_id``.

    Each file's content is a bytes-like object or a sequence of pieces
    written in order: bytes-like objects, or ``FileRange`` (an incremental
    publish passes unchanged stretches of the previous generation that way,
    and the kernel copies them without them passing through this process).

    The caller must hold ``IndexLock`` for ``index_id``. Returns the index
    directory path. Every file and directory is flushed before the link that
    publishes it is renamed. On any failure before that rename, ``StorageError``
    says which step failed, the previous generation stays current and intact,
    and the new one is deleted: nothing is retried, in particular not an fsync
    that failed. If only the final flush of ``rag/`` fails, the new generation
    is already visible; ``StorageError`` says so and the previous generation is
    kept on disk, so after a crash the index is still one of the two. With
    ``tidy=False`` the generations no longer named are left for the caller to
    remove (``remove_stale_generations``) once readers are not waiting on it.
    ``before_swap(generation_dir)`` runs once the generation is complete and
    flushed, just before the link makes it current (the writer records what
    it verified there, ``core.index.verified``); it must not raise.
    """
    if set(files) != set(FILES):
        raise ValueError("publish needs exactly the four index files")
    with NewGeneration(artifacts, index_id, ops=ops) as gen:
        gen.write(files)
        return gen.commit(tidy=tidy, before_swap=before_swap)


class NewGeneration:
    """``publish`` in steps: the files of the next generation written one call at a time, then committed.

    ``write_behind`` writes some files in a thread while the caller computes
    the others (the copies and flushes wait on the disk and release the GIL);
    ``write`` waits for it before writing its own files, so the filesystem
    calls still come one after another, in the order ``publish`` makes them
    for the files given, and a failure in the thread is the caller's
    ``StorageError``, raised by the next call, before any other file is
    written. Used as a context manager, which must enter before any write:
    leaving it without ``commit`` (an exception, in this thread or the other)
    waits for the thread and deletes the unfinished generation, so the
    previous one stays current, exactly as when ``publish`` fails.
    """

    def __init__(self, artifacts: str | os.PathLike[str], index_id: str, *, ops: FsOps | None = None) -> None:
        self.ops = ops or OS_OPS
        self.index_id = index_id
        self.artifacts = artifacts
        self.root = rag_root(artifacts)
        self.link = index_dir(artifacts, index_id)
        self.gens = self.root / ".gen" / index_id
        name = f"g{time.time_ns():020d}-{os.getpid()}"
        self.tmp_gen, self.final_gen = self.gens / (name + ".tmp"), self.gens / name
        self.tmp_link = self.root / f".{index_id}.link.tmp"
        self._made: Path | None = None  # the new generation directory, deleted if the publish fails
        self._written: set[str] = set()
        self._behind: threading.Thread | None = None
        self._behind_failed: tuple[OSError, str] | BaseException | None = None
        self._open: list[GenerationFile] = []

    def __enter__(self) -> NewGeneration:
        step = _Step()
        try:
            _make_dirs(self.ops, self.gens, step)
            step(f"creating {self.tmp_gen}")
            self.ops.mkdir(self.tmp_gen)
            self._made = self.tmp_gen
        except OSError as e:
            raise self._failed(e, step.what) from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._behind is not None:
            # Left early (an error here, or no commit): the thread's own failure, if any, is not the one to report.
            self._behind.join()
            self._behind, self._behind_failed = None, None
        for f in self._open:
            f.abandon()
        if self._made is not None:  # not committed: nothing of it may stay
            _remove_entry(self.ops, self._made)
            self._made = None
            _remove_entry(self.ops, self.tmp_link)

    def write_behind(self, files: Mapping[str, FileContent]) -> None:
        """Start writing and flushing ``files`` in a thread; the next ``write`` or ``commit`` waits for it."""
        self._join()
        self._claim(files)
        files = dict(files)  # the caller's mapping may change meanwhile

        def run() -> None:
            step = _Step()
            try:
                self._write_files(files, step)
            except OSError as e:
                self._behind_failed = (e, step.what)
            except BaseException as e:  # noqa: BLE001 - handed to the caller's thread, raised there
                self._behind_failed = e

        self._behind = threading.Thread(target=run, name=f"publish {self.index_id}", daemon=True)
        self._behind.start()

    def write(self, files: Mapping[str, FileContent]) -> None:
        """Write and flush ``files`` into the new generation (after what ``write_behind`` started)."""
        self._join()
        self._claim(files)
        step = _Step()
        try:
            self._write_files(files, step)
        except OSError as e:
            raise self._failed(e, step.what) from None

    def stream(self, name: str) -> GenerationFile:
        """Create ``name`` in the new generation, to be written piece by piece (``GenerationFile``).

        Its content never needs to be held whole: the full rebuild writes
        docs.jsonl and vectors.f32 a batch of chunks at a time. Its ``close``
        flushes it; ``commit`` needs every streamed file closed.
        """
        self._join()
        self._claim({name: b""})
        path = self.tmp_gen / name
        step = _Step()
        try:
            step(f"creating {path}")
            fd = self.ops.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except OSError as e:
            raise self._failed(e, step.what) from None
        out = GenerationFile(self, path, fd)
        self._open.append(out)
        return out

    def commit(self, *, tidy: bool = True, before_swap: Callable[[Path], object] | None = None) -> Path:
        """Flush the generation directory, rename it into place and the link over the index; see ``publish``."""
        self._join()
        if self._written != set(FILES) or self._made != self.tmp_gen or any(f.fd is not None for f in self._open):
            raise ValueError("commit needs the four index files written, once")
        ops, root, tmp_gen, final_gen, gens, link, tmp_link = (
            self.ops, self.root, self.tmp_gen, self.final_gen, self.gens, self.link, self.tmp_link)
        step = _Step()
        try:
            step(f"flushing {tmp_gen} to disk")
            _fsync_dir(ops, tmp_gen)
            step(f"renaming {tmp_gen} to {final_gen.name}")
            ops.rename(tmp_gen, final_gen)
            self._made = final_gen
            step(f"flushing {gens} to disk")
            _fsync_dir(ops, gens)
            if before_swap is not None:
                before_swap(final_gen)
            step(f"creating the link {tmp_link}")
            _remove_entry(ops, tmp_link)
            ops.symlink(os.path.relpath(final_gen, root), tmp_link)
            step(f"renaming the link over {link}")
            if link.is_dir() and not link.is_symlink():
                _replace_plain_dir(ops, tmp_link, link, gens)
            else:
                ops.rename(tmp_link, link)
            self._made = None  # committed: readers now open the new generation
        except OSError as e:
            raise self._failed(e, step.what) from None
        try:
            _fsync_dir(ops, root)
        except OSError as e:
            # The rename is visible but may not be on disk; keep the old generation
            # so that whichever link survives a crash names a complete one.
            raise StorageError(
                f"published index {self.index_id!r} but flushing {root} to disk failed: {e.strerror or e}; "
                f"after a crash the index may be the previous one ({_hint(e)})"
            ) from None
        if tidy:
            remove_stale_generations(self.artifacts, self.index_id, ops=ops)
        return link

    def _claim(self, files: Mapping[str, FileContent]) -> None:
        if self._made != self.tmp_gen or not set(files) <= set(FILES) - self._written:
            raise ValueError("each of the four index files is written once, inside the with block, before commit")
        self._written |= set(files)

    def _write_files(self, files: Mapping[str, FileContent], step: _Step) -> None:
        for fname in FILES:
            if fname in files:
                _write_file(self.ops, self.tmp_gen / fname, files[fname], step)

    def _join(self) -> None:
        """Wait for ``write_behind``'s thread; raise what failed in it."""
        if self._behind is None:
            return
        self._behind.join()
        self._behind = None
        failed, self._behind_failed = self._behind_failed, None
        if isinstance(failed, tuple):
            raise self._failed(*failed)
        if failed is not None:
            raise failed

    def _failed(self, e: OSError, what: str) -> StorageError:
        """The error of a failed step before the link rename, once the new generation is deleted."""
        if self._made is not None:
            _remove_entry(self.ops, self._made)
            self._made = None
        _remove_entry(self.ops, self.tmp_link)
        return StorageError(
            f"cannot publish index {self.index_id!r}: {what} failed: {e.strerror or e}; "
            f"the previous index is unchanged ({_hint(e)})"
        )


class GenerationFile:
    """One file of a ``NewGeneration`` written piece by piece (``NewGeneration.stream``).

    A failed write or flush is the generation's ``StorageError`` (the
    unfinished generation is deleted, the previous one stays current).
    """

    def __init__(self, gen: NewGeneration, path: Path, fd: int) -> None:
        self.gen, self.path = gen, path
        self.fd: int | None = fd
        self.size = 0
        """Bytes written so far."""

    def write(self, data: FileContent) -> None:
        """Append ``data`` (a buffer, or buffers and ``FileRange`` pieces, as ``publish`` takes)."""
        if self.fd is None:
            raise ValueError(f"{self.path} is closed")
        try:
            _write_pieces(self.gen.ops, self.fd, data)
        except OSError as e:
            raise self.gen._failed(e, f"writing {self.path}") from None
        self.size += file_size(data)

    def close(self) -> None:
        """Flush the file to disk and close it."""
        if self.fd is None:
            raise ValueError(f"{self.path} is closed")
        fd, self.fd = self.fd, None
        what = f"flushing {self.path} to disk"
        try:
            try:
                self.gen.ops.fsync(fd)
            finally:
                self.gen.ops.close(fd)
        except OSError as e:
            raise self.gen._failed(e, what) from None

    def abandon(self) -> None:
        """Close without flushing (the generation is being deleted)."""
        if self.fd is not None:
            fd, self.fd = self.fd, None
            try:
                self.gen.ops.close(fd)
            except OSError:
                pass


def _replace_plain_dir(ops: FsOps, tmp_link: Path, link: Path, gens: Path) -> None:
    """Put the link where another tool wrote the index as a plain directory.

    A directory cannot be renamed over, so the two names are swapped in one
    step when the filesystem can (readers see the old or the new index), and
    the old directory is kept as an old generation.
    """
    adopted = gens / f"g{0:020d}-adopted-{time.time_ns()}"
    try:
        ops.exchange(tmp_link, link)
    except OSError as e:
        if e.errno not in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            raise
        # No atomic swap here: for a moment between the two renames there is no index.
        ops.rename(link, adopted)
        try:
            ops.rename(tmp_link, link)
        except OSError:
            try:
                ops.rename(adopted, link)  # put the old index back rather than leave none
            except OSError:
                pass
            raise
        return
    try:
        ops.rename(tmp_link, adopted)
    except OSError:
        pass  # the old directory is now a leftover under the temporary name; removed later


def _remove_entry(ops: FsOps, path: Path) -> None:
    """Remove a file, link or directory tree, best effort (what stays is a leftover for later)."""
    try:
        if not os.path.lexists(path):
            return
        if path.is_dir() and not path.is_symlink():
            for entry in os.scandir(path):
                _remove_entry(ops, Path(entry.path))
            ops.rmdir(path)
        else:
            ops.unlink(path)
    except OSError:
        pass


def remove_stale_generations(artifacts: str | os.PathLike[str], index_id: str, *, ops: FsOps | None = None) -> None:
    """Delete generation directories that the link no longer names (writer only, under the lock).

    Also deletes unfinished ``<gen>.tmp`` directories, the temporary link, and every overlay there
    (``core.index.overlay``), the current generation's included, with their temporary names: one
    describes a save whose publish did not follow, and the sync under way writes its own.
    A reader that resolved an old generation keeps its open files; one that
    had not opened them yet retries on the new generation. Best effort:
    what cannot be removed now is removed by a later writer.
    """
    ops = ops or OS_OPS
    root = rag_root(artifacts)
    gens = root / ".gen" / index_id
    current = os.path.realpath(root / index_id)
    try:
        entries = list(os.scandir(gens))
    except OSError:
        entries = []
    for entry in entries:
        if os.path.realpath(entry.path) != current:
            _remove_entry(ops, Path(entry.path))
    _remove_entry(ops, root / f".{index_id}.link.tmp")


def remove_leftovers(artifacts: str | os.PathLike[str], index_id: str, *, ops: FsOps | None = None) -> None:
    """Remove what killed writers left: unpublished or stale generations, temporary links and state files.

    Call it holding ``IndexLock``. It writes nothing when there is nothing to
    remove, so a sync that changes nothing still writes nothing.
    """
    ops = ops or OS_OPS
    remove_stale_generations(artifacts, index_id, ops=ops)
    remove_dead_temporaries(rag_root(artifacts) / ".cache")
    try:
        entries = list(os.scandir(state_dir(artifacts, index_id)))
    except OSError:
        return
    for entry in entries:
        if entry.name.endswith(".tmp"):
            _remove_entry(ops, Path(entry.path))


# -- vectors embedded but not yet published ----------------------------------------------------
