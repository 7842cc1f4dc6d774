"""Vectors a sync embedded but has not published yet, kept so a failed run's work is not redone."""

from __future__ import annotations

import json
import os
import stat
import zlib
from collections.abc import Container, Iterable, Sequence

import numpy as np

from ragtui.core.index.index_format import bad_vector_rows
from ragtui.core.ingest.publish import state_dir

__all__ = ["EmbedJournal", "JournalReader"]


class EmbedJournal:
    """``.state/<index_id>/embedded.bin``: vectors a sync embedded before it could publish.

    Only saves time. A sync appends each batch the backend answered; if the
    run then fails (the backend died, the disk filled), the next run takes
    those vectors instead of asking again. Entries are keyed by the chunk
    fingerprint and valid only for the same ``model`` and ``dim``; a torn or
    damaged record is ignored. A successful publish clears the journal.
    Every I/O failure is swallowed: without the journal a sync only costs more.
    """

    _MAGIC = b"RAGTUI-EMBEDDED 1\n"
    MAX_BYTES = 1 << 30
    """Records past the first GiB are not read (they only save embedding calls)."""

    def __init__(self, artifacts: str | os.PathLike[str], index_id: str, model: str, dim: int) -> None:
        self.path = state_dir(artifacts, index_id) / "embedded.bin"
        self._header = self._MAGIC + json.dumps({"model": model, "dim": dim}).encode("utf-8") + b"\n"
        self._dim = dim
        self._size = 32 + 4 * dim + 4  # sha256 digest, float32 vector, crc32 of both

    def load(self, wanted: Container[str] | None = None) -> dict[str, np.ndarray]:
        """fingerprint -> unit float32 vector, for every intact record of this model and dim.

        With ``wanted`` (a container of fingerprints), only those are kept. The
        file is read a block at a time, without blocking (a FIFO or device in
        its place is ignored) and only up to ``MAX_BYTES``: memory stays
        bounded by what is kept, whatever the file holds.
        """
        out: dict[str, np.ndarray] = {}
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return out
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode) or _read_exact(fd, len(self._header)) != self._header:
                return out
            per_block = max(1, (1 << 20) // self._size)
            remaining = (self.MAX_BYTES - len(self._header)) // self._size
            while remaining > 0:
                block = _read_exact(fd, min(per_block, remaining) * self._size)
                for pos in range(0, len(block) - self._size + 1, self._size):
                    rec = block[pos : pos + self._size]
                    key = rec[:32].hex()
                    if wanted is not None and key not in wanted:
                        continue
                    if zlib.crc32(rec[:-4]) != int.from_bytes(rec[-4:], "little"):
                        continue
                    out[key] = np.frombuffer(rec, dtype="<f4", count=self._dim, offset=32).astype(np.float32)
                if len(block) < per_block * self._size:
                    break
                remaining -= per_block
        except OSError:
            pass
        finally:
            os.close(fd)
        return _sound_rows(out)

    def reader(self) -> JournalReader:
        """``load`` for a sync that asks batch by batch (the full rebuild): the journal is read once, now.

        What is kept is where each record lies (a fingerprint and an offset,
        not its vector); each call reads the wanted records again and checks
        them as ``load`` does. Records appended after this call are not seen:
        the sync that appends them has their vectors already. Without a
        journal, the calls read nothing. ``close`` it when done.
        """
        return JournalReader(self)

    def append(self, fingerprints: Sequence[str], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        body = b"".join(
            rec + zlib.crc32(rec).to_bytes(4, "little")
            for rec in (bytes.fromhex(fp) + vectors[i].tobytes() for i, fp in enumerate(fingerprints))
        )
        try:
            try:
                st = os.lstat(self.path)
            except FileNotFoundError:
                fresh = True
            else:
                if not stat.S_ISREG(st.st_mode):
                    # A FIFO would block the open for writing, a link may lead anywhere: start afresh.
                    os.unlink(self.path)
                    fresh = True
                else:
                    fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
                    try:
                        fresh = not stat.S_ISREG(os.fstat(fd).st_mode) or _read_exact(fd, len(self._header)) != self._header
                    finally:
                        os.close(fd)
            if fresh:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                body = self._header + body
            flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_TRUNC if fresh else os.O_APPEND)
            fd = os.open(self.path, flags, 0o644)
            try:
                view = memoryview(body)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
        except OSError:
            pass

    def clear(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


def _read_exact(fd: int, n: int) -> bytes:
    """Up to ``n`` bytes from ``fd``: fewer only at the end of the file."""
    parts, got = [], 0
    while got < n:
        block = os.read(fd, n - got)
        if not block:
            break
        parts.append(block)
        got += len(block)
    return b"".join(parts)


class JournalReader:
    """``EmbedJournal.reader``: the journal's records as they were when it was made, read on demand."""

    def __init__(self, journal: EmbedJournal) -> None:
        self._size, self._dim = journal._size, journal._dim
        self._where: dict[str, int] = {}
        self._fd: int | None = None
        try:
            fd = os.open(journal.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        header = journal._header
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode) or _read_exact(fd, len(header)) != header:
                raise OSError("not a journal")
            size = self._size
            per_block = max(1, (1 << 20) // size)
            at = len(header)
            while at + size <= journal.MAX_BYTES:
                block = _read_exact(fd, min(per_block, (journal.MAX_BYTES - at) // size) * size)
                for pos in range(0, len(block) - size + 1, size):
                    self._where[block[pos : pos + 32].hex()] = at + pos  # the last record of a key, as load keeps
                at += len(block)
                if len(block) < per_block * size:
                    break
        except OSError:
            self._where.clear()
        if self._where:
            self._fd = fd
        else:
            os.close(fd)

    def __call__(self, wanted: Iterable[str]) -> dict[str, np.ndarray]:
        """fingerprint -> unit float32 vector, for each of ``wanted`` the journal held intact."""
        out: dict[str, np.ndarray] = {}
        if self._fd is None:
            return out
        size = self._size
        try:
            for key in wanted:
                pos = self._where.get(key)
                if pos is None:
                    continue
                rec = os.pread(self._fd, size, pos)
                if len(rec) == size and zlib.crc32(rec[:-4]) == int.from_bytes(rec[-4:], "little"):
                    out[key] = np.frombuffer(rec, dtype="<f4", count=self._dim, offset=32).astype(np.float32)
        except OSError:
            return {}
        return _sound_rows(out)

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _sound_rows(out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The records of ``out`` whose vector could be an index row (finite, unit length); the rest are dropped."""
    if not out:
        return out
    keys = list(out)
    bad = set(bad_vector_rows(np.stack([out[k] for k in keys])).tolist())
    return {key: out[key] for i, key in enumerate(keys) if i not in bad}
