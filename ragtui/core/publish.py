"""The index writer: encode the four files, lock, and publish atomically.

Layout under ``<artifacts>/rag/`` (see spec/index-format.md, "Publishing"):

    <index_id>            a symbolic link to the current generation directory
    .gen/<index_id>/<g>/  generation directories, each holding exactly the four files
    .locks/<index_id>.lock   the writer lock (flock; released by the kernel if the writer dies)
    .state/<index_id>/    writer state that only saves time (file hash cache, source root)

Publishing writes a new generation directory, flushes every file and the
directory, then renames a fresh link over ``<index_id>`` (one atomic rename)
and flushes ``rag/``. A reader resolves the link once and opens all four
files from that one generation, so it sees the old index or the new one,
never a mix; a writer killed at any point leaves the old link and its
generation untouched.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from ragtui.core.analyzer import analyze
from ragtui.core.bm25 import encode_bm25
from ragtui.core.errors import LockedError, StorageError, UsageError
from ragtui.core.index_format import (
    BM25,
    DOCS,
    FILES,
    META,
    VECTORS,
    ChunkRecord,
    IndexMeta,
    encode_docs,
    encode_meta,
    encode_vectors,
)

__all__ = ["IndexLock", "encode_index", "index_dir", "publish", "rag_root", "state_dir", "utc_now"]


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def rag_root(artifacts: str | os.PathLike) -> Path:
    return Path(artifacts) / "rag"


def index_dir(artifacts: str | os.PathLike, index_id: str) -> Path:
    check_index_id(index_id)
    return rag_root(artifacts) / index_id


def state_dir(artifacts: str | os.PathLike, index_id: str) -> Path:
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
    meta: IndexMeta, records: Sequence[ChunkRecord], vectors: np.ndarray, doc_terms=None
) -> dict[str, bytes]:
    """The four files' bytes. Deterministic: only ``meta.created_at`` varies between runs.

    ``doc_terms`` (each chunk's analyzed terms) may be passed when the caller
    already has them; otherwise the texts are analyzed here.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.shape != (len(records), meta.dim) or meta.n_chunks != len(records):
        raise ValueError("records, vectors and meta disagree on n_chunks or dim")
    if doc_terms is None:
        doc_terms = [analyze(r.text) for r in records]
    return {
        META: encode_meta(meta),
        DOCS: encode_docs(records),
        VECTORS: encode_vectors(vectors),
        BM25: encode_bm25(doc_terms),
    }


class IndexLock:
    """One writer per index: an exclusive, non-blocking ``flock`` outside the index directory.

    The kernel drops the lock when the holder dies, so a lock left by a
    killed writer never blocks; the file itself may stay and is reused. The
    holder's pid, for the refusal message, comes from /proc/locks.
    """

    def __init__(self, artifacts: str | os.PathLike, index_id: str) -> None:
        self.path = rag_root(artifacts) / ".locks" / f"{index_id}.lock"
        self.index_id = index_id
        self._fd: int | None = None

    def acquire(self) -> IndexLock:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise StorageError(f"cannot create the lock {self.path}: {e.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _flock_holder(fd)
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                who = f" (pid {holder})" if holder else ""
                raise LockedError(
                    f"index {self.index_id!r} is being written by another process{who}; "
                    "wait for it to finish or stop it"
                ) from None
            raise StorageError(f"cannot lock {self.path}: {e.strerror}") from None
        # Nothing is written into the lock file: a sync that changes nothing
        # must not even touch it.
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def __enter__(self) -> IndexLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _flock_holder(fd: int) -> str:
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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(dir_path: Path, name: str, data: bytes) -> None:
    fd = os.open(dir_path / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(artifacts: str | os.PathLike, index_id: str, files: dict[str, bytes]) -> Path:
    """Publish ``files`` (the four names) as the new generation of ``index_id``.

    The caller must hold ``IndexLock`` for ``index_id``. Returns the index
    directory path. On any failure the previous generation stays current and
    ``StorageError`` says what failed.
    """
    if set(files) != set(FILES):
        raise ValueError("publish needs exactly the four index files")
    root = rag_root(artifacts)
    link = index_dir(artifacts, index_id)
    gens = root / ".gen" / index_id
    name = f"g{time.time_ns():020d}-{os.getpid()}"
    tmp_gen = gens / (name + ".tmp")
    try:
        gens.mkdir(parents=True, exist_ok=True)
        tmp_gen.mkdir()
        for fname in FILES:
            _write_file(tmp_gen, fname, files[fname])
        _fsync_dir(tmp_gen)
        final_gen = gens / name
        os.rename(tmp_gen, final_gen)
        _fsync_dir(gens)
        tmp_link = root / f".{index_id}.link.tmp"
        try:
            os.unlink(tmp_link)
        except FileNotFoundError:
            pass
        os.symlink(os.path.relpath(final_gen, root), tmp_link)
        if link.is_dir() and not link.is_symlink():
            # An index directory written in place by another tool: keep it as
            # an old generation, then point the name at the new one.
            os.rename(link, gens / f"g{0:020d}-adopted-{time.time_ns()}")
        os.rename(tmp_link, link)
        _fsync_dir(root)
    except OSError as e:
        shutil.rmtree(tmp_gen, ignore_errors=True)
        raise StorageError(f"cannot publish index {index_id!r} under {root}: {e.strerror or e}") from None
    remove_stale_generations(artifacts, index_id)
    return link


def remove_stale_generations(artifacts: str | os.PathLike, index_id: str) -> None:
    """Delete generation directories that the link no longer names (writer only, under the lock).

    A reader that resolved an old generation keeps its open files; one that
    had not opened them yet retries on the new generation.
    """
    root = rag_root(artifacts)
    gens = root / ".gen" / index_id
    current = os.path.realpath(root / index_id)
    try:
        entries = list(os.scandir(gens))
    except FileNotFoundError:
        return
    for entry in entries:
        if os.path.realpath(entry.path) != current:
            shutil.rmtree(entry.path, ignore_errors=True)
    tmp_link = root / f".{index_id}.link.tmp"
    try:
        os.unlink(tmp_link)
    except FileNotFoundError:
        pass
