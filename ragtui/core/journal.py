"""Vectors a sync embedded but has not published yet, kept so a failed run's work is not redone."""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Sequence

import numpy as np

from ragtui.core.index_format import bad_vector_rows
from ragtui.core.publish import state_dir

__all__ = ["EmbedJournal"]


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

    def __init__(self, artifacts: str | os.PathLike, index_id: str, model: str, dim: int) -> None:
        self.path = state_dir(artifacts, index_id) / "embedded.bin"
        self._header = self._MAGIC + json.dumps({"model": model, "dim": dim}).encode("utf-8") + b"\n"
        self._dim = dim
        self._size = 32 + 4 * dim + 4  # sha256 digest, float32 vector, crc32 of both

    def load(self) -> dict[str, np.ndarray]:
        """fingerprint -> unit float32 vector, for every intact record of this model and dim."""
        try:
            raw = self.path.read_bytes()
        except OSError:
            return {}
        if not raw.startswith(self._header):
            return {}
        keys: list[str] = []
        vecs: list[np.ndarray] = []
        for pos in range(len(self._header), len(raw) - self._size + 1, self._size):
            rec = raw[pos : pos + self._size]
            if zlib.crc32(rec[:-4]) != int.from_bytes(rec[-4:], "little"):
                continue
            keys.append(rec[:32].hex())
            vecs.append(np.frombuffer(rec, dtype="<f4", count=self._dim, offset=32))
        if not vecs:
            return {}
        matrix = np.array(vecs, dtype=np.float32)
        bad = set(bad_vector_rows(matrix).tolist())  # finite and unit length, as an index row must be
        return {key: matrix[i] for i, key in enumerate(keys) if i not in bad}

    def append(self, fingerprints: Sequence[str], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype="<f4")
        body = b"".join(
            rec + zlib.crc32(rec).to_bytes(4, "little")
            for rec in (bytes.fromhex(fp) + vectors[i].tobytes() for i, fp in enumerate(fingerprints))
        )
        try:
            try:
                with open(self.path, "rb") as f:
                    fresh = f.read(len(self._header)) != self._header
            except FileNotFoundError:
                fresh = True
            if fresh:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                body = self._header + body
            flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | (os.O_TRUNC if fresh else os.O_APPEND)
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
